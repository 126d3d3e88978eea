// Package postgres is the PostgreSQL event store and ledger store: streams and events in a gap-free
// global order (read by transaction id, then position; see docs/adr/0002-global-order-on-postgres.md),
// the receipts with their bodies, the contacts a delivery carries, and the embedded schema migrations
// that create every table. schema.sql is the schema they make (`make schema` regenerates it; a test
// compares).
//
// A delivery commits in one statement — its appends, its receipt and its personal data (contacts, seat
// contacts, free texts) — and concurrent deliveries share a statement and a transaction (group
// commit, docs/adr/0012-group-commit.md). Subscribers are woken by NOTIFY after a commit; those that
// have caught up share one reader of the log's end (docs/adr/0023-one-reader-of-the-log-end-per-store.md). It also
// answers the counts the database gauges read (EventsAfter, CountQuarantined).
//
// It owns events, streams, receipts, receipt_bodies, contacts and seat_contacts: their SQL is here
// and nowhere else (make lint checks Go strings against the table owners of scripts/ownercheck).
// Others reach them through its methods: the deferred receipts of adapters/jobs (InsertDeferred,
// Receipt), the receipts' and contacts' parts of an erasure and of retention (erase.go), called by
// adapters/privacy in its transaction, the quarantined receipts adapters/postgres/readmodel opens
// items for and a provider's last webhook delivery (receiptreads.go), and the read model's invitees
// and contact search (Contacts).
//
// It implements domain/eventlog.Store, eventlog.Subscriber and domain/ledger.Store (sealing bodies
// through ledger.BodySealer), and translates pgx/PostgreSQL errors into the eventlog sentinels at its
// edge. It imports domain/... and pgx; it must not import other adapters, HTTP or provider packages.
// Test databases come from the pgtest subpackage.
package postgres
