// Package esdb is the EventStoreDB/KurrentDB event store: it implements eventlog.Store and
// eventlog.Subscriber with the official gRPC client (EventStore-Client-Go/v4), and ledger.Store as
// LedgerStore, which appends to EventStoreDB and then writes the delivery's receipt through a
// consumer-side ReceiptWriter (PostgreSQL in production).
//
// It owns: stream and expected-version mapping (1-based port versions, 0-based server revisions),
// idempotency by event ID that does not depend on the server's best-effort cache (read the stream,
// recognise the IDs, append with the exact revision read, and claim each event ID once across streams),
// $all reads and catch-up subscriptions that resume after drops, translation of client errors into the
// eventlog sentinels, and replacing a client that gave up after a failed discovery.
//
// It imports domain/eventlog, domain/ledger and domain/resource (the link stream is read like the
// booking streams), the client, gRPC status codes and google/uuid. It must
// not import adapters/postgres or any other adapter (the receipt writer is an interface declared here),
// nor esdbtest outside tests; domain/ must never import it. See docs/adr/0005 and
// docs/operations/kurrentdb.md.
package esdb
