-- Linked resources (docs/adr/0014-linked-resources.md): the calendar projection's fold of the
-- "resources" stream. A provider resource listed here claims its slots under the name it is linked to,
-- so that the exclusion constraint on calendar_slots guards a host's calendars at every provider as
-- one; a provider resource not listed is its own canonical resource. Derived like every calendar
-- table: a rebuild recomputes it from the log.
-- +goose Up
CREATE TABLE calendar_resource_links (
    resource text PRIMARY KEY, -- the provider's identifier, as calendar_bookings.resources holds it
    name text NOT NULL          -- the canonical resource
);
CREATE INDEX calendar_resource_links_name_idx ON calendar_resource_links (name);
