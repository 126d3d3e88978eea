// Package calendlyapi is a fake of the part of Calendly's API v2 the provider sync uses, answering as
// Calendly documents: bearer tokens (401 otherwise), count 1–100 (default 20) and page_token paging
// with Calendly's pagination object, the start-time window, status and sort filters of
// GET /scheduled_events, the invitees of a scheduled event, GET /users/me, webhook subscriptions
// (list, create, get, delete; no update, as at Calendly), and a request budget per window answered
// with 429 and the X-RateLimit-* headers.
//
// Go methods seed what the fake holds (Schedule, Join, Cancel, Reschedule, MarkNoShow,
// DisableSubscription) and count requests. For development (the dev-sinks command) two routes that
// are not Calendly's change it over HTTP: POST /_fake/deliveries records the invitee a webhook body
// (as `bookingledger send calendly` builds it) describes — also at /_fake/webhooks/calendly, where
// `send calendly <event> --url <fake>/_fake` posts it — and POST /_fake/subscriptions/{uuid}/disable
// does what Calendly does after 24 hours of failed deliveries.
//
// Where Calendly's behaviour is not documented the fake picks one and says so: a second subscription
// for the same callback URL and user is refused with 409 (Calendly refuses it; the status is
// unconfirmed), DELETE answers 204, and the invitees listing returns canceled invitees unless
// status=active.
//
// It keeps its state in memory and imports only the standard library and adapters/providers/fakeapi
// (the listener every fake shares); it must not import bookingledger's other packages.
package calendlyapi
