-- Operational webhooks (docs/relay.md, "Operational webhooks"): each occurrence of an operational
-- event (endpoint.failing, endpoint.recovered, endpoint.disabled, delivery.dead, provider.*) as one row
-- per target — the alert URL (target_endpoint NULL) or an endpoint subscribed to "operational.*" —
-- sent once by a River job. The rows of one occurrence share its webhook_id.
-- +goose Up
CREATE TABLE relay_operational_sends (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id      text        NOT NULL,
    type            text        NOT NULL,
    -- The endpoint the event is about (none for a provider's); not a reference: the record outlives it.
    about_endpoint  bigint,
    target_endpoint bigint      REFERENCES relay_endpoints (id) ON DELETE CASCADE,
    at              timestamptz NOT NULL,
    text            text        NOT NULL,
    data            jsonb       NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz,
    error           text        NOT NULL DEFAULT '',
    UNIQUE (webhook_id, target_endpoint)
);
CREATE INDEX relay_operational_sends_about ON relay_operational_sends (about_endpoint, id);
