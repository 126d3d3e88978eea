-- The seats that left a seated booking (issue #35): the calendar keeps, per booking, the keys of the
-- seats whose removal the booking's fold took (booking.Seat.Key, in fold order), so that the process
-- steps plan each leaver's cancellation email from the booking's whole history rather than from the
-- batch its removal arrived in (a seat's cancel that arrives before its create is planned when the
-- create arrives, as a rebuild plans it). No personal data: seat keys, as in the events. NULL for a
-- booking that is not seated. Existing rows get NULL until their booking's next event or a rebuild of
-- the calendar recomputes them.
-- +goose Up
ALTER TABLE calendar_bookings ADD COLUMN seats_left text[];
