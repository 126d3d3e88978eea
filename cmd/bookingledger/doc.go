// Command bookingledger records booking webhooks in an event-sourced ledger. Its subcommands (run.go
// dispatches them; 'bookingledger help' lists them) are serve, migrate, send, history, calendar,
// reconcile, receipts, rebuild, steps, dev-sinks, endpoints, deliveries, replay, token, resources,
// sync, providers, erase, keys, version and help, each flag with an environment default (see
// docs/api.md).
//
// Each subcommand's code lives in a package under internal/, by concern: cmdline (flags with their
// variables, usage errors, exit codes), ledgerdb (opening the database and the event store), serve
// (serve, migrate, rebuild and the projections' wiring; serve is a server: openServer builds and
// starts everything, Run serves the two listeners until interrupted and drains them, Close stops the
// rest in stopOrder), stepscmd, relaycmd, synccmd, admincmd, devsinks and sendcmd.
//
// main only calls run, which takes everything it touches as arguments (arguments, environment,
// output streams, a signal-aware context), so that tests drive the real binary's code in-process.
// cmd/bookingledger and its internal packages are the one place that imports concrete adapters
// (postgres, esdb, the read model, the provider packages) and wires them into adapters/httpapi and
// the projection runner; nothing else imports them.
package main
