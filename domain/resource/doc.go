// Package resource is the functional core of linked resources: one host's provider calendars (a
// Calendly user, a Cal.com user, an Acuity calendar) joined under one canonical name, so that the
// calendar guards them as one. Links and unlinks are events on one stream (Stream), folded in stream
// order into State; Link, Unlink and Plan decide which events a command adds, and Service appends
// them through the event-store port (domain/eventlog), on PostgreSQL and EventStoreDB alike.
//
// One stream for every link (not one per name) is what makes "an identifier belongs to at most one
// name" a guarantee: every decision is appended with the exact version it was decided on (ADR 0014).
//
// It imports only the standard library and domain/eventlog. It never reads the clock: times are
// passed in; event IDs are derived from the stream version and the change.
package resource
