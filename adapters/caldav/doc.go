// Package caldav is the host calendar target of the process steps (adapters/process.Calendar) over
// CalDAV (RFC 4791): an iCalendar VEVENT per booking thread, PUT at a path derived from the step key
// with If-None-Match: * (create) or If-Match: <ETag> (update), read back with GET (the probe after an
// unknown outcome), DELETE on cancel. Each host resource has its own calendar collection, named by a
// URL template with a {resource} placeholder; Setup creates a missing one (MKCALENDAR) for
// `bookingledger steps setup`. The davtest subpackage runs real CalDAV servers (Radicale, Xandikos)
// for tests.
//
// GET uses github.com/emersion/go-webdav's caldav client; PUT and DELETE are plain net/http requests,
// because that client (v0.6.0) sets no conditional headers. Connections go through adapters/egress.
// It imports adapters/process (the interface it implements) and must not import the ledger or HTTP
// server packages.
package caldav
