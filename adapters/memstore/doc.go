// Package memstore is an event store in memory: the eventlog.Store (with eventlog.Subscriber) and the
// ledger.Store (appends and receipt committed together) that domain tests run on without a database.
// It passes the same conformance suites as the PostgreSQL and EventStoreDB stores (adapters/eventlogtest,
// adapters/ledgertest); nothing survives the process, so it is for tests and demos only.
//
// It imports domain/... and the standard library only.
package memstore
