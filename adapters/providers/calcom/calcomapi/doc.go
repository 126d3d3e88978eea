// Package calcomapi is a stand-in for Cal.com's API v2 as the provider sync uses it: the bookings list
// (cal-api-version 2024-08-13: offset paging with take 1–250 and skip, the afterStart, beforeEnd,
// afterUpdatedAt and bookingUid filters, sortStart and sortUpdatedAt), one booking by uid, and the
// user's webhooks (list, create, get, update, delete). It answers as Cal.com documents: a bearer API
// key starting with cal_ (else 401 with Cal.com's error body), the {"status","data","pagination"}
// envelope, 400 for a take outside 1–250, and, past a configurable request budget, 429 with
// Retry-After and the X-RateLimit-*-Default headers.
//
// Without cal-api-version: 2024-08-13 the bookings list answers in the shape of the older version
// Cal.com falls back to ({"data":{"bookings":[…]}}), which a 2024-08-13 client cannot read.
//
// Tests seed it through Go methods (Add, Cancel, Reschedule, Reject, DisableWebhook) and read its
// request counter; for development (dev-sinks) POST /_fake/deliveries records what a Cal.com webhook
// body describes (also at /_fake/deliveries/webhooks/calcom, where `bookingledger send calcom … --url
// <host>/_fake/deliveries` posts) and POST /_fake/subscriptions/{id}/disable disables a webhook. State
// is in memory.
//
// It imports only the standard library and adapters/providers/fakeapi (the listener every fake
// shares); it must not import bookingledger's other packages, so that it
// answers as Cal.com does rather than as bookingledger expects.
package calcomapi
