-- A deferred receipt (docs/adr/0006-river-for-deferred-work.md) carries no events yet, so its bookings
-- array is empty and the booking's history could not list it. pending_booking names the booking such a
-- receipt is about when the provider's body says so without its data (Acuity: the appointment id), so
-- that the history shows the delivery while it waits. '' for every other receipt: those name their
-- bookings through their events.
--
-- A constant default makes ADD COLUMN a catalog change (no table rewrite); the partial index holds
-- only the few deferred rows.
-- +goose Up

ALTER TABLE receipts ADD COLUMN pending_booking text NOT NULL DEFAULT '';
CREATE INDEX receipts_pending_booking_idx ON receipts (pending_booking) WHERE pending_booking <> '';
