// Command bookingledger records booking webhooks in an event-sourced ledger. Its subcommands (run.go
// dispatches them; 'bookingledger help' lists them) are serve, migrate, send, history, calendar,
// reconcile, receipts, rebuild, steps, dev-sinks, endpoints, deliveries, replay, token, resources,
// sync, providers, erase, keys, version and help, each flag with an environment default (see
// docs/api.md).
//
// serve is a server (server.go): openServer builds and starts everything, Run serves the two listeners
// until interrupted and drains them, Close stops the rest in stopOrder.
//
// main only calls run, which takes everything it touches as arguments (arguments, environment,
// output streams, a signal-aware context), so that tests drive the real binary's code in-process. This
// is the one place that imports concrete adapters (postgres, esdb, the read model, the provider
// packages) and wires them into adapters/httpapi and the projection runner; nothing imports it.
package main
