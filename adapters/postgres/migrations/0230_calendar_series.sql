-- The recurring series a booking is an occurrence of (Cal.com recurringEventId), so that a cancel of
-- all remaining occurrences, which Cal.com sends for one occurrence only, recomputes the others
-- (issue #35). '' when none is known. Existing rows keep ''; a rebuild fills the column from the
-- events (booking.series_joined.v1).
-- +goose Up
ALTER TABLE calendar_bookings ADD COLUMN series text NOT NULL DEFAULT '';
CREATE INDEX calendar_bookings_series_idx ON calendar_bookings (series) WHERE series <> '';

-- +goose Down
DROP INDEX calendar_bookings_series_idx;
ALTER TABLE calendar_bookings DROP COLUMN series;
