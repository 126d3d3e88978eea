// Package acuitysink is a local stand-in for Acuity Scheduling's API, for `make run`, the README tour
// (the dev-sinks command starts it) and the provider sync's tests. It answers
// GET /api/v1/appointments/{id} the way Acuity does, for any id, so that `bookingledger send acuity …`
// can be tried without an Acuity account; each appointment has a made-up client (name and an
// example.com address derived from the id), so the invitee e-mail steps have someone to write to.
// GET /api/v1/appointments lists the appointments it knows (fetched, set or delivered) by date
// (minDate, maxDate, max default 100, canceled, showall, calendarID, direction); /api/v1/webhooks
// lists, creates (at most 25, targets on port 80 or 443) and deletes dynamic webhooks; past a
// per-second request budget it answers 429.
//
// Routes that are not Acuity's: PUT /api/v1/appointments/{id} sets an appointment's state (a host
// moving or canceling it); POST /api/v1/_fake/deliveries (also /_fake/deliveries) takes the body
// `bookingledger send acuity` builds and plays that change at Acuity without any webhook, for the
// sync to find.
//
// It is not a test double for the fetch path (acuitytest is): it accepts any credentials and keeps
// its state in memory. It imports only the standard library and adapters/providers/fakeapi (the
// listener every fake shares); it must not import bookingledger's other packages.
package acuitysink
