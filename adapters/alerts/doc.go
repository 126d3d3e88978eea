// Package alerts sends operator alerts to the one alert URL an operator configures
// (BOOKINGLEDGER_ALERT_URL): the relay's endpoint alerts and the provider sync's. An alert is a typed
// Standard Webhooks message signed with the alert secret, or Slack's {"text": …} — one body builder
// and one POST for every kind, so that every alert reads and verifies alike.
//
// It imports the standard library and adapters/providers/standard (the signature scheme) only; the
// callers own their alert tables and jobs.
package alerts
