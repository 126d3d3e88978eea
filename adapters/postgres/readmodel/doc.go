// Package readmodel stores the calendar projection in PostgreSQL (calendar_bookings, the
// calendar_slots exclusion constraint that refuses double booking, payment-only streams, the
// reconciliation queue; the canonical resources read from the link stream) and answers the queries of
// the HTTP API, the UI and the CLI, the contacts and the search by name or address included. It loads the inputs of
// calendar.Recompute and writes what it returns, per batch for the connected set a batch touches
// and for the whole calendar in a rebuild; no calendar rule lives here. It is the one package that
// names the calendar's tables: others read them through it (StepReader: what the process steps read
// of the calendar, behind the interfaces adapters/process declares; Items: the reconciliation items
// adapters/providersync raises).
// EraseCancelReasons is calendar_bookings' part of an erasure, which adapters/privacy calls in its
// transaction.
//
// It reads events only through the eventlog.Store port (PostgreSQL or EventStoreDB), never by joining
// event tables in SQL; receipts and contacts come from adapters/postgres, their owner (ReceiptSource,
// postgres.Contacts). It imports domain/..., projections/..., adapters/postgres and
// adapters/postgres/checkpoint; it must not import HTTP, provider or other store packages.
package readmodel
