// Package standard verifies and maps Standard Webhooks (spec v1) deliveries: the webhook-id,
// webhook-timestamp and webhook-signature headers, and bookingledger's booking payload convention
// (docs/providers/standard.md) for senders that have no provider package of their own.
//
// A booking is "standard-<data.booking>"; the event ID comes from webhook-id. It imports
// adapters/providers and the domain only; it must not import an HTTP server, a database or an event
// store.
package standard
