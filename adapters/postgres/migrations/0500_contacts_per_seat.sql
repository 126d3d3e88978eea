-- Seated bookings (Cal.com seats, issue #35): each attendee of a seated booking is reached on their
-- own. seat_contacts keeps a seat's attendee (email address, name) by booking and seat — the seat's
-- key is its reference (booking.Seat.UID), else its attendee key (booking.Seat.Attendee, a digest) —
-- beside the booking's own contact in contacts (its first attendee). Personal data, like contacts:
-- saved with the delivery's events (adapters/postgres/personal.go), deleted by the erasure of the
-- booking (adapters/privacy/erase.go).
--
-- process_steps gets the kind invitee_email.seat_cancellation (one leaving attendee's own
-- cancellation email, keyed per booking and seat) and the column seat naming that seat ('' for every
-- other step). The new check is a strict superset of 0050's, so every stored row passes it.
-- +goose Up
CREATE TABLE seat_contacts (
    booking text NOT NULL,
    seat text NOT NULL CHECK (seat <> ''),
    email text NOT NULL,
    name text NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (booking, seat)
);

ALTER TABLE process_steps ADD COLUMN seat text NOT NULL DEFAULT '';
ALTER TABLE process_steps DROP CONSTRAINT process_steps_kind_check;
ALTER TABLE process_steps ADD CONSTRAINT process_steps_kind_check
    CHECK (kind IN ('host_calendar.create', 'host_calendar.update', 'host_calendar.delete',
        'invitee_email.confirmation', 'invitee_email.rescheduled', 'invitee_email.cancellation',
        'invitee_email.seat_cancellation'));

-- +goose Down
ALTER TABLE process_steps DROP CONSTRAINT process_steps_kind_check;
ALTER TABLE process_steps ADD CONSTRAINT process_steps_kind_check
    CHECK (kind IN ('host_calendar.create', 'host_calendar.update', 'host_calendar.delete',
        'invitee_email.confirmation', 'invitee_email.rescheduled', 'invitee_email.cancellation'));
ALTER TABLE process_steps DROP COLUMN seat;
DROP TABLE seat_contacts;
