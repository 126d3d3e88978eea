-- Ordered delivery, throttle and circuit breaker per endpoint (issue #34, docs/relay.md).
--
-- relay_endpoints:
--   ordered: a booking's (a stream's) deliveries go out in stream-version order, version n+1 only
--     after version n succeeded or went dead;
--   rate_per_second, concurrency: the endpoint's throttle (0: unlimited);
--   breaker_failures: consecutive failures that open the circuit breaker (0: no breaker);
--   disable_after_ms: how long a failure streak lasts before the relay disables the endpoint (0: never);
--   failing_since: when the current failure streak began; probe_delivery, probe_at, probes: the open
--     breaker's one probe, when it may go and how many went; throttle_next_at: the endpoint's next free
--     send slot under its rate; auto_disabled: the relay disabled it after a sustained failure (its
--     paused deliveries are sent again only by enable --send-missed).
-- relay_deliveries.held: a pending delivery with no job, waiting for its booking's earlier version
--   ('order') or for the endpoint's breaker to close ('breaker'); whoever ends the wait gives it a job.
-- relay_alerts.disabled: the alert says the endpoint was disabled after a sustained failure.
-- +goose Up
ALTER TABLE relay_endpoints
    ADD COLUMN ordered boolean NOT NULL DEFAULT false,
    ADD COLUMN rate_per_second double precision NOT NULL DEFAULT 0 CHECK (rate_per_second >= 0),
    ADD COLUMN concurrency integer NOT NULL DEFAULT 0 CHECK (concurrency >= 0),
    ADD COLUMN breaker_failures integer NOT NULL DEFAULT 5 CHECK (breaker_failures >= 0),
    ADD COLUMN disable_after_ms bigint NOT NULL DEFAULT 432000000 CHECK (disable_after_ms >= 0),
    ADD COLUMN failing_since timestamptz,
    ADD COLUMN probe_delivery bigint,
    ADD COLUMN probe_at timestamptz,
    ADD COLUMN probes integer NOT NULL DEFAULT 0,
    ADD COLUMN throttle_next_at timestamptz,
    ADD COLUMN auto_disabled boolean NOT NULL DEFAULT false;

ALTER TABLE relay_deliveries ADD COLUMN held text CHECK (held IN ('order', 'breaker'));
CREATE INDEX relay_deliveries_held ON relay_deliveries (endpoint_id, held, stream, stream_version) WHERE held IS NOT NULL;
CREATE INDEX relay_deliveries_stream_order ON relay_deliveries (endpoint_id, stream, stream_version)
    WHERE state IN ('pending', 'paused');

ALTER TABLE relay_alerts ADD COLUMN disabled boolean NOT NULL DEFAULT false;
