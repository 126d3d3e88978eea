// Package projections owns the read side of the ledger, independent of where it is stored: the
// runner (catch-up from a checkpoint over the gap-free global log, then live or polling; one active
// runner per projection behind a Locker; rebuild with progress), the calendar's rule as one pure
// function (Recompute over a connected component: rows, slot holders, statuses, reconciliation
// items), the reconciliation item model, the auditor's booking history with its text renderers, and
// the contact and search types the read side shares (people.go).
//
// Storage lives in adapters/postgres/checkpoint (any projection that is its tables plus one Apply) and
// adapters/postgres/readmodel (the calendar). This package imports domain/... and the standard library
// only; it must not import adapters, pgx, HTTP or provider packages.
package projections
