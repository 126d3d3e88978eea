// Package projections owns the read side of the ledger, independent of where it is stored: the
// runner (catch-up from a checkpoint over the gap-free global log, then live or polling; one active
// runner per projection behind a Locker; rebuild with progress) and the sentinel errors the read side
// shares (errors.go).
//
// Every projection has one shape: a pure rule in a subpackage — calendar (Recompute over a connected
// component), steps (PlanThreads), relay (the fan-out and the message) — and an adapter type that
// implements Projection on its own checkpoint row, loads the rule's inputs, calls it and writes what
// it returns in the transaction that advances the checkpoint: adapters/postgres/readmodel (the
// calendar), adapters/process (the steps). The auditor's booking history and its text renderers are
// the subpackage history. Storage helpers live in adapters/postgres/checkpoint (a projection that is
// its tables plus one Apply, as the relay's, uses its Projection). This package and its subpackages
// import domain/... and the standard library only (and one another); they must not import adapters,
// pgx, HTTP or provider packages.
package projections
