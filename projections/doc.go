// Package projections owns the read side of the ledger, independent of where it is stored: the
// projection runner (catch-up from a checkpoint over the gap-free global log, then live through
// a Subscriber given in RunnerOptions or polling; one active runner per projection behind a Locker; rebuild with
// progress), the calendar's rule as one pure function, Recompute (over a connected component: the
// bookings' rows from their folds and linked payments, the slot-holder rule that picks one holder per
// overlapping set whatever the arrival order, the statuses that follow, the reconciliation items they
// call for), the reconciliation item model, and the auditor's booking history with its text timeline renderer.
//
// Storage lives in adapters/postgres: checkpoint (the checkpoint row, the advisory-lock Locker, any
// projection that is its tables plus one Apply) and readmodel (the calendar projection and its
// queries). This package imports domain/... and the standard library only; it must not import
// adapters, pgx, HTTP or provider packages.
package projections
