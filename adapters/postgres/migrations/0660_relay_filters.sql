-- An endpoint's filter beyond its types (provider, resource, booking status after the event;
-- docs/relay.md, "Filters"), and the history of its rules: a change of types or filter applies to the
-- events recorded after it, so the fan-out matches each event by the rule in force when it was
-- recorded (projections/relay.Endpoint.RuleAt).
-- +goose Up
ALTER TABLE relay_endpoints ADD COLUMN filter text NOT NULL DEFAULT '';

CREATE TABLE relay_endpoint_rules (
    endpoint_id bigint      NOT NULL REFERENCES relay_endpoints (id) ON DELETE CASCADE,
    since       timestamptz NOT NULL,
    types       text[]      NOT NULL DEFAULT '{}',
    -- The filter in its syntax ('provider=calcom,status=active'); empty: none.
    filter      text        NOT NULL DEFAULT '',
    PRIMARY KEY (endpoint_id, since)
);
INSERT INTO relay_endpoint_rules (endpoint_id, since, types, filter)
SELECT id, created_at, types, '' FROM relay_endpoints;

-- A replay's rate limit (deliveries per second) as it was started.
ALTER TABLE relay_replays ADD COLUMN rate double precision NOT NULL DEFAULT 0;
