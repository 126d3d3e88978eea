// Package providersync closes the hole webhooks leave: it reads each provider's API for what is true
// there, records what the webhooks missed through the same ledger path with the same event IDs, and
// watches (and, when asked, repairs) the providers' webhook subscriptions.
//
// A provider package implements Source (read bookings through its API and map them as its webhooks
// would be mapped) and Subscriptions (list, create, re-enable its webhook subscriptions); this package
// drives them: a sync run records each page through the ledger (a receipt per object read, source
// "sync", the API's object kept as the sealed body), keeps a cursor per provider, counts what only
// the sync found, and opens a reconciliation item when a run or a subscription fails. The periodic
// runs are River jobs.
//
// It imports the domain (ledger), adapters/providers (the types the provider packages fill), pgx and
// River. It must not import a provider package, the HTTP server or the event-store adapters: sources
// and the ledger are handed in as the interfaces declared here.
package providersync
