// Package stripeapi is a local stand-in for the parts of Stripe's REST API that bookingledger reads
// and writes: GET /v1/events (the provider sync) and /v1/webhook_endpoints (subscription management).
// It answers as Stripe documents — basic auth with the secret key, limit 1–100 (default 10),
// has_more and starting_after paging, created[…] and types[] filters, events kept 30 days, at most 16
// webhook endpoints, the endpoint secret only in the create answer, Idempotency-Key replays, a
// per-second request budget answered with 429, errors as {"error":{"type","message"}} — for the
// sync's tests, the dev-sinks command and the README tour. It keeps its state in memory.
//
// Admin routes that are not Stripe's: POST /_fake/deliveries stores a webhook body (as `bookingledger
// send stripe` builds it) as an event; POST /_fake/subscriptions/{id}/disable plays Stripe disabling
// an endpoint that kept failing.
//
// It imports only the standard library and adapters/providers/fakeapi (the listener every fake
// shares); it must not import bookingledger's other packages.
package stripeapi
