// Package eventlog is the event-store port: append to a stream with an expected version, read a stream,
// read the global log in a gap-free order from a position.
//
// It owns the contract every store (adapters/postgres, adapters/esdb) implements and the sentinel errors
// callers branch on. It imports only the standard library; stores translate their driver errors into
// these sentinels at their edge. It also owns UUIDv5, the one derivation of every deterministic ID
// (provider and link event IDs, step keys, EventStoreDB claims). The conformance suite that proves a store keeps the contract lives in
// adapters/eventlogtest (it needs testify, which domain/ may not import).
package eventlog
