// Package postgres is the PostgreSQL event store and ledger store: streams and events in a gap-free
// global order (read by transaction id, then position; see docs/adr/0002-global-order-on-postgres.md),
// the receipts table and the bodies it references (stored once per digest, sealed by the BodySealer the
// caller sets: adapters/privacy), and the embedded schema migrations that create bookingledger's tables
// (River's own come from adapters/jobs).
//
// A delivery commits in one statement — its appends, its receipt and its personal data (contacts, seat
// contacts, free texts) — and concurrent deliveries share a statement and a transaction (group
// commit, docs/adr/0012-group-commit.md). Subscribers are woken by NOTIFY after a commit. It also
// answers the counts the database gauges read (EventsAfter, CountQuarantined).
//
// It implements domain/eventlog.Store, eventlog.Subscriber and domain/ledger.Store, and translates
// pgx/PostgreSQL errors into the eventlog sentinels at its edge. It imports domain/..., pgx and goose; it must
// not import other adapters, HTTP or provider packages. Test databases come from the pgtest subpackage.
package postgres
