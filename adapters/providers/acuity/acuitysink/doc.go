// Package acuitysink is a local stand-in for Acuity Scheduling's appointments API, for `make run` and
// the README tour (the dev-sinks command starts it): it answers GET /api/v1/appointments/{id} the way
// Acuity does, for any id, so that `bookingledger send acuity …` can be tried without an Acuity
// account. It is not a test double (acuitytest is): it accepts any credentials and keeps its state in
// memory.
//
// It imports only the standard library; it must not import bookingledger's other packages.
package acuitysink
