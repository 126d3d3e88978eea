// Package relay delivers every ledger event to the user's own endpoints: a projection of the event
// log plans one delivery per (event, matching endpoint) together with River jobs of up to 32 of an
// endpoint's deliveries, in the transaction that advances its checkpoint; workers send each as a
// Standard Webhooks message, record every attempt, retry on a schedule, alert on failure streaks and
// pause endpoints that answer 410.
// Deliveries, attempts, replays and alerts live in the relay_* tables; job arguments carry their IDs
// only.
//
// It owns the relay_* tables and the "relay" River queue. It imports the domain, the event-store
// port, the Standard Webhooks scheme (adapters/providers/standard: one signing rule) and River; it
// never imports other adapters' internals or the HTTP server.
package relay
