// Command bookingledger records booking webhooks in an event-sourced ledger: subcommands serve,
// migrate, send, history, calendar, reconcile, rebuild, version and help, each flag with an
// environment default (see docs/api.md).
//
// main only calls run, which takes everything it touches as arguments (arguments, environment,
// output streams, a signal-aware context), so that tests drive the real binary's code in-process. This
// is the one place that imports concrete adapters (postgres, esdb, the read model, the provider
// packages) and wires them into adapters/httpapi and the projection runner; nothing imports it.
package main
