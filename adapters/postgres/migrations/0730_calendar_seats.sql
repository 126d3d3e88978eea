-- The seats of a seated booking (issue #35: the host's calendar event lists its attendees): the
-- calendar keeps, per booking, the keys of the seats held now (booking.Seat.Key, in fold order; ''
-- for a seat known only by number), so that the process steps know which attendees the host's event
-- must list. No personal data: a seat key is the provider's seat reference or a digest of the
-- address, as in the events. NULL for a booking that is not seated. Existing rows get NULL until their
-- booking's next event or a rebuild of the calendar recomputes them.
-- +goose Up
ALTER TABLE calendar_bookings ADD COLUMN seats text[];
