// Package providersync closes the hole webhooks leave: it reads each provider's API for what is true
// there, records what the webhooks missed through the same ledger path with the same event IDs, and
// watches (and, when asked, repairs) the providers' webhook subscriptions.
//
// A provider package implements Source (read bookings through its API and map them as its webhooks
// would be mapped) and Subscriptions (list, create, re-enable its webhook subscriptions); this package
// drives them: a sync run records each page through the ledger (a receipt per object read, source
// "sync", the API's object kept as the sealed body), keeps a cursor per provider, counts what only
// the sync found, and opens a reconciliation item when a run or a subscription fails. The periodic
// runs are River jobs (queue provider_sync). It keeps the signing secrets `providers connect` created,
// sealed, and StoredSecrets makes a provider verify with them next to the configured ones; Collector
// exports its state as gauges; its alerts go out through adapters/alerts. It owns the provider_*
// tables.
//
// It imports the domain (ledger), projections/calendar (the reconciliation item types),
// adapters/providers (the types the provider packages fill), adapters/alerts, pgx, River and the
// Prometheus client, and the owners of the tables it reads or writes besides its own:
// adapters/postgres (a provider's last webhook delivery among the receipts) and
// adapters/postgres/readmodel (its reconciliation items). It must not import a provider package or
// the HTTP server, nor record through the event store directly: sources and the ledger are handed in
// as the interfaces declared here.
package providersync
