// Package relayapi is the HTTP face of the relay: endpoints, deliveries, replays and alerts under
// /api/admin/, and a booking's deliveries under /api/bookings/{booking}/deliveries. Its DTOs are
// also what the CLI prints with --json.
//
// It imports adapters/relay and the standard library; the server (adapters/httpapi) mounts it on
// the admin mux, whose authentication applies to it as to every /api/ route.
package relayapi
