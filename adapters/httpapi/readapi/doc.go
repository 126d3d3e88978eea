// Package readapi is the read side of the JSON API: the handlers of /api/bookings/{booking},
// /api/bookings/{booking}/history, /api/calendar and /api/reconciliation, with their JSON DTOs. The
// server mounts them with Register; the CLI reuses WriteHistoryJSON for `bookingledger history --json`.
//
// It depends on the Reader interface it declares (implemented by adapters/postgres/readmodel) and on
// projections' types; it must not import pgx, event stores or provider packages.
package readapi
