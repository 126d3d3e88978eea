// Package readapi is the read side of the JSON API: the handlers of /api/bookings/{booking},
// /api/bookings/{booking}/history, /api/bookings/{booking}/contact, /api/calendar, /api/search,
// /api/receipts, /api/receipts/{id}, /api/reconciliation and POST /api/reconciliation/{id}/resolve,
// with their JSON DTOs, and the JSON writer and error body the other admin APIs answer with. The
// server mounts them with Register; the CLI reuses WriteHistoryJSON for `bookingledger history --json`.
//
// It depends on the Reader interface it declares (implemented by adapters/postgres/readmodel) and on
// projections' types; it must not import pgx, event stores or provider packages.
package readapi
