// Package projections owns the read side of the ledger, independent of where it is stored: the
// runner (catch-up from a checkpoint over the gap-free global log, then live or polling; one active
// runner per projection behind a Locker; rebuild with progress), the calendar's rule as one pure
// function (Recompute over a connected component: rows, slot holders, statuses, reconciliation
// items), the reconciliation item model, the auditor's booking history with its text renderers, and
// the contact and search types the read side shares (people.go).
//
// The process steps' rule is the subpackage steps. Every projection has one shape: a pure rule here
// (Recompute, steps.PlanThreads) and an adapter type that implements Projection on its own checkpoint
// row, loads the rule's inputs, calls it and writes what it returns in the transaction that advances
// the checkpoint: adapters/postgres/readmodel (the calendar), adapters/process (the steps). Storage
// helpers live in adapters/postgres/checkpoint (a projection that is its tables plus one Apply, as
// the relay's, uses its Projection). This package imports domain/... and the standard library
// only; it must not import adapters, pgx, HTTP or provider packages.
package projections
