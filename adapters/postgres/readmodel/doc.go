// Package readmodel stores the projections in PostgreSQL: the calendar (calendar_bookings, with the
// calendar_slots exclusion constraint that refuses double booking), payment-only streams, the
// reconciliation queue, and the projection checkpoints (migrations/0010_read_models.sql). It
// implements projections.Projection (apply a batch and its checkpoint in one transaction),
// projections.Locker (a session-level advisory lock on a dedicated connection), and the queries the
// HTTP API and the CLI call: Booking, Calendar, History, OpenItems, Resolve, Rebuild.
//
// It reads events only through the eventlog.Store port (the store may be PostgreSQL or EventStoreDB)
// and never joins event tables in SQL; receipts are read from the PostgreSQL receipts table. It imports
// domain/..., projections and adapters/postgres; it must not import HTTP, provider or other store
// packages.
package readmodel
