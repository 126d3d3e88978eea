// Package relay holds the relay's pure rules, free of storage and HTTP: which event types an endpoint
// takes (type patterns), which events pass its filter (provider, resource, booking status after the
// event), which rule of an endpoint is in force for an event (filters change over time and apply to
// the events recorded after the change), the fan-out of one event to the endpoints that take it, and
// which operational events an endpoint is subscribed to; the plan of a batch's deliveries (Plan) and
// of a replay's backfill (Backfills); the subjects filters look at (Subjects: a booking's state after
// the event and the links, from streams read through a loader callback and decoded with a Decoder);
// the message and its fold (StreamMessage); the endpoint URL's shape, secrets in force and
// descriptions; a delivery job's rounds — an attempt's outcome and what it leads to on the retry
// schedule (Schedule.Next), the breaker's and throttle's admission (Admit, AfterRound), the order the
// failure streaks count a round in, the job's course of inline and handed-off retries; alert
// thresholds and the content of alerts and operational events; a replay's query, rate, pacing and
// plan.
//
// adapters/relay loads the inputs (endpoints, their rules, the streams of the event log) and writes
// the outputs (deliveries, jobs) through adapters/postgres/relaystore. This package imports the
// standard library and domain/ only (docs/relay.md, "Filters").
package relay
