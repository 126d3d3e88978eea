// Package acuitytest is a fake of Acuity Scheduling's appointments API (GET /appointments/{id}) for
// tests: realistic JSON (offsets without a colon, duration as a string), basic-auth checks, 404 for
// unknown appointments, and failures on demand.
//
// It is test support: it imports net/http/httptest and testing, and nothing of bookingledger, so any
// test may use it; production code must not import it.
package acuitytest
