// Package calcom verifies and maps Cal.com webhook deliveries: the X-Cal-Signature-256 scheme (an
// HMAC of the body alone, no timestamp signed), and the BOOKING_*, BOOKING_NO_SHOW_UPDATED and flat
// MEETING_* triggers turned into booking events — including the cancel Cal.com never sends for the old
// booking of a reschedule.
//
// A Cal.com booking is its uid: booking ID "calcom-<uid>". It imports adapters/providers and the domain
// only; it must not import an HTTP server, a database or an event store.
package calcom
