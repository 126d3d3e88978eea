// Package esdbtest is an in-process EventStoreDB/KurrentDB gRPC server for tests. It is built on the
// server stubs generated into the EventStore-Client-Go/v4 module (protos/streams, protos/gossip,
// protos/serverfeatures) and listens on loopback, so the real client (esdb.Client) talks to it over
// real gRPC: the adapter under test cannot tell it from a single node except where docs/adr/0005 says.
//
// It reproduces: expected-revision checks with the WrongExpectedVersion response the client turns into
// ErrorCodeWrongExpectedVersion; stream-not-found reads; the server's idempotent re-append (index-backed
// under an exact revision, cache-backed and forgetful under any); one global $all log with increasing
// commit/prepare positions, a few system events included; $all and stream reads in both directions;
// catch-up subscriptions to $all from a position, then live, with stream or event-type filters,
// checkpoints and caught-up messages; and faults: dropping every subscription, forgetting the
// idempotency cache, stopping and restarting the node on the same address with its data kept.
//
// New serves in-process, or, when BOOKINGLEDGER_TEST_ESDB_SERVER (EnvServer) names a built
// esdbtestserver, from that one process per test binary, built without -race (see remote.go).
//
// It is test support: it imports testing for New, and nothing of bookingledger. Production code must
// not import it.
package esdbtest
