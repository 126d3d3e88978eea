// Package calcom verifies and maps Cal.com webhook deliveries: the X-Cal-Signature-256 scheme (an
// HMAC of the body alone, no timestamp signed), and the BOOKING_*, BOOKING_NO_SHOW_UPDATED and flat
// MEETING_* triggers turned into booking events — including the cancel Cal.com never sends for the old
// booking of a reschedule.
//
// API (api*.go) is the provider sync's client of Cal.com's API v2: it reads bookings and maps each
// through the same mapping as the webhooks, and lists, creates and re-enables webhooks. calcomapi is
// its stand-in.
//
// A Cal.com booking is its uid: booking ID "calcom-<uid>". It imports adapters/providers and the domain
// only (HTTP requests go through providers.API); it must not import an HTTP server, a database, an
// event store or adapters/providersync, whose interfaces it satisfies.
package calcom
