-- The relay (docs/relay.md): the user's endpoints, one delivery per (event, endpoint), every attempt,
-- replays and alerts. River job rows only point at these rows (River deletes its rows; these are the
-- record).
-- +goose Up

CREATE TABLE relay_endpoints (
    id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    url                  text        NOT NULL,
    -- Type patterns ('booking.*'); empty means every type.
    types                text[]      NOT NULL DEFAULT '{}',
    description          text        NOT NULL DEFAULT '',
    -- Signing secrets ("whsec_..."): kept in clear because HMAC signing needs them.
    secret               text        NOT NULL,
    previous_secret      text,
    previous_until       timestamptz,
    disabled_at          timestamptz,
    disabled_reason      text        NOT NULL DEFAULT '',
    -- The failure streak: consecutive failed attempts and the highest alert threshold sent for it.
    consecutive_failures integer     NOT NULL DEFAULT 0,
    alerted_failures     integer     NOT NULL DEFAULT 0,
    created_at           timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE relay_replays (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id bigint      NOT NULL REFERENCES relay_endpoints (id) ON DELETE CASCADE,
    from_time   timestamptz NOT NULL,
    to_time     timestamptz NOT NULL,
    types       text[]      NOT NULL DEFAULT '{}',
    only_failed boolean     NOT NULL,
    total       integer     NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE relay_deliveries (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id    bigint      NOT NULL REFERENCES relay_endpoints (id) ON DELETE CASCADE,
    event_id       uuid        NOT NULL,
    booking        text        NOT NULL,
    stream         text        NOT NULL,
    stream_version bigint      NOT NULL,
    event_type     text        NOT NULL,
    recorded_at    timestamptz NOT NULL,
    -- pending: a job will attempt it; paused: its endpoint is disabled (enable resumes it);
    -- succeeded; dead: the schedule ran out.
    state          text        NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'paused', 'succeeded', 'dead')),
    -- attempts counts every attempt; run_attempts those of the current run (a replay starts a new run,
    -- and the retry schedule counts from it).
    attempts       integer     NOT NULL DEFAULT 0,
    run_attempts   integer     NOT NULL DEFAULT 0,
    replay_id      bigint      REFERENCES relay_replays (id) ON DELETE SET NULL,
    next_attempt_at timestamptz,
    last_status    integer,
    last_error     text        NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    completed_at   timestamptz,
    UNIQUE (endpoint_id, event_id)
);
CREATE INDEX relay_deliveries_state ON relay_deliveries (state, endpoint_id);
CREATE INDEX relay_deliveries_booking ON relay_deliveries (booking);
CREATE INDEX relay_deliveries_window ON relay_deliveries (endpoint_id, recorded_at);
CREATE INDEX relay_deliveries_replay ON relay_deliveries (replay_id) WHERE replay_id IS NOT NULL;

CREATE TABLE relay_attempts (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id bigint      NOT NULL REFERENCES relay_deliveries (id) ON DELETE CASCADE,
    attempt     integer     NOT NULL,
    replay_id   bigint,
    at          timestamptz NOT NULL,
    -- status is NULL when no response came (refused, timeout); error says why.
    status      integer,
    latency_ms  double precision NOT NULL,
    succeeded   boolean     NOT NULL,
    response    text        NOT NULL DEFAULT '',
    error       text        NOT NULL DEFAULT ''
);
CREATE INDEX relay_attempts_delivery ON relay_attempts (delivery_id, attempt);

-- Alerts about an endpoint's failure streak ('failing' at 1, 5 and 20 consecutive failures) and its
-- end ('recovered'); sent_at is set once BOOKINGLEDGER_ALERT_URL took it.
CREATE TABLE relay_alerts (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id bigint      NOT NULL REFERENCES relay_endpoints (id) ON DELETE CASCADE,
    kind        text        NOT NULL CHECK (kind IN ('failing', 'recovered')),
    failures    integer     NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz,
    error       text        NOT NULL DEFAULT ''
);
CREATE INDEX relay_alerts_endpoint ON relay_alerts (endpoint_id, id);
