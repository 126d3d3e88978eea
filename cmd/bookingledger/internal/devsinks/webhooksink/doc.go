// Package webhooksink is a receiving HTTP server on loopback for relay messages and alerts: it
// accepts every POST, reports it (webhook-id, type, booking and version; never the body) and can be
// told to fail — answer a chosen status — through its control endpoint, so that `bookingledger
// dev-sinks` and the README tour can show retries, alerts and replays.
//
// It imports only the standard library and must stay so: it stands in for the user's software, not
// part of the ledger.
package webhooksink
