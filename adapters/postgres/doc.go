// Package postgres is the PostgreSQL event store and ledger store: streams and events in a gap-free
// global order (read by transaction id, then position; see docs/adr/0002-global-order-on-postgres.md),
// the receipts table, and the embedded schema migrations that create them.
//
// It implements domain/eventlog.Store, eventlog.Subscriber and domain/ledger.Store, and translates
// pgx/PostgreSQL errors into the eventlog sentinels at its edge. It imports domain/... and pgx; it must
// not import other adapters, HTTP or provider packages. Test databases come from the pgtest subpackage.
package postgres
