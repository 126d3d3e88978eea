-- The invitee's time zone (issue #31, readable mail): each provider's payload names it (Calendly the
-- invitee's timezone, Cal.com attendees[].timeZone, Acuity timezone), and the invitee emails write
-- their times in it. It is kept with the contact it belongs to — personal data like the address,
-- saved with the delivery's events (adapters/postgres/personal.go) and deleted with the contact by an
-- erasure — never in the events. '' when the provider sent none (or one that is no IANA zone): the
-- emails then use the resource's zone, else UTC. Existing rows get ''.
-- +goose Up
ALTER TABLE contacts ADD COLUMN time_zone text NOT NULL DEFAULT '';
ALTER TABLE seat_contacts ADD COLUMN time_zone text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE seat_contacts DROP COLUMN time_zone;
ALTER TABLE contacts DROP COLUMN time_zone;
