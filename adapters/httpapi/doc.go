// Package httpapi is the HTTP edge of bookingledger: POST /webhooks/{provider} (size cap, signature
// verification over the raw bytes before any parsing, mapping, recording through the ledger, and the
// mapping of errors to HTTP statuses), the operational endpoints /healthz, /readyz and /metrics, and
// graceful serving with a bounded drain and deliberate connection limits. Recording is admitted a
// bounded number of deliveries at a time (past the bound and its queue wait, a fast 503 with
// Retry-After); rejected requests' receipts are rate-limited per provider, and repeated log lines
// summarised, while every request is counted in its metrics. It keeps two surfaces apart:
// the public one (Handler: webhooks and probes, for the internet) and the admin one (AdminHandler:
// /metrics and the routes mounted through Config.AdminRoutes), each served on its own listener.
//
// Its one promise: a 2xx is written only after ledger.Service.Record returned, i.e. after the commit
// that holds the receipt and the events; every failure to record answers 503 so the provider retries.
//
// It imports the domain, adapters/providers (the Provider contract) and prometheus; it must not import
// a database driver, an event-store adapter or a concrete provider package: cmd/bookingledger wires
// those in. The subpackage sample builds signed deliveries for the send command, tests and benchmarks.
package httpapi
