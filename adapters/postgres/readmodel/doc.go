// Package readmodel stores the projections in PostgreSQL: the calendar (calendar_bookings, with the
// calendar_slots exclusion constraint that refuses double booking), payment-only streams, the
// reconciliation queue (migrations/0010_read_models.sql). It implements projections.Projection (apply
// a batch and its checkpoint in one transaction, with adapters/postgres/checkpoint's compare-and-set)
// and the queries the HTTP API and the CLI call: Booking, Calendar, History, OpenItems, Resolve,
// Rebuild. It loads the inputs of projections.Recompute and writes what it returns, per batch for the
// connected set a batch touches and once for the whole calendar in a rebuild; no calendar rule lives
// here.
//
// It reads events only through the eventlog.Store port (the store may be PostgreSQL or EventStoreDB)
// and never joins event tables in SQL; receipts are read from the PostgreSQL receipts table. It imports
// domain/..., projections, adapters/postgres and adapters/postgres/checkpoint; it must not import HTTP, provider or other store
// packages.
package readmodel
