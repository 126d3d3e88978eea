// Package jobs runs bookingledger's background work on River, a PostgreSQL job queue
// (docs/adr/0006-river-for-deferred-work.md). Today that is one kind of job: finishing a deferred
// delivery — a verified webhook whose events need data the provider did not send and could not be
// fetched while the request was open (Acuity). Queue.Defer stores the deferred receipt and inserts the
// job in one transaction; the worker fetches again with River's backoff, records the result through
// the ledger with a receipt that names the deferred one, and records a quarantined receipt after the
// last attempt. Migrate sets up River's own schema.
//
// It owns River's schema and job_instances (liveness.go); the deferred receipts are written and read
// through the receipts table's owner (adapters/postgres), handed in as Receipts.
//
// It imports the domain (ledger), adapters/providers (the Mapped contract and its sentinels), pgx and
// River. It must not import the HTTP server, a provider package or the event-store adapters
// (adapters/postgres included; make lint checks it): the ledger, the receipts and the refetching
// providers are handed in as the small interfaces declared here.
package jobs
