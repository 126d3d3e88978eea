// Package relay delivers every ledger event to the user's own endpoints: a projection of the event
// log plans one delivery per (event, matching endpoint) together with River jobs of up to 32 of an
// endpoint's deliveries, in the transaction that advances its checkpoint; workers send each as a
// Standard Webhooks message, record every attempt, retry on a schedule, alert on failure streaks and
// pause endpoints that answer 410.
//
// It is the calendar's shape: the rules are projections/relay's (fan-out and its plan, filters and
// the subjects they look at, the message and its fold, an attempt's outcome and next attempt, the
// breaker's admission, the streaks' order, a job's course across its rounds, alert and operational
// content, replay queries, backfills, rates and plans); the relay_* tables are
// adapters/postgres/relaystore's, whose typed statements and transactions (a round's admission and
// recording, the streaks' count, a replay and its backfill's pages, operational sends) it calls, and
// whose value types (Endpoint, Delivery, …) it re-exports, as it re-exports projections/relay's
// (ReplayQuery, Message, …). This package keeps the workers (HTTP sends, River jobs on the "relay"
// and "relay_replay" queues and every job they insert, the projection's Apply on the runner, reads
// of the event log); its subpackages hold the endpoint URL check and HTTP client (relayguard: DNS
// and dialing) and the Prometheus metrics (relaymetrics). Job arguments carry delivery, alert and
// send IDs only.
//
// It imports the domain, the event-store port, relaystore, the Standard Webhooks scheme
// (adapters/providers/standard: one signing rule) and River; it never names a table in SQL, nor
// imports other adapters' internals or the HTTP server.
package relay
