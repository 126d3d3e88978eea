-- The provider sync (adapters/providersync, docs/operations/sync.md): what each provider's API said
-- the last time it was read, the webhook subscriptions found there, signing secrets created by
-- `bookingledger providers connect` (sealed with the master key), and the operator alerts the sync
-- and the subscription watch raise. Reconciliation items gain the kind "sync": a sync run or a
-- subscription check that failed, or a subscription found disabled or missing.
-- +goose Up

CREATE TABLE provider_sync_state (
    provider text PRIMARY KEY,
    -- The public URL of this deployment's webhook endpoint for the provider, as `providers connect`
    -- was given it: the subscription the watch checks (and repairs).
    webhook_url text NOT NULL DEFAULT '',
    -- Where the periodic sync resumes (the provider's own cursor or time; '' = from its window).
    cursor text NOT NULL DEFAULT '',
    last_run_at timestamptz,
    last_ok_at timestamptz,
    last_error text NOT NULL DEFAULT '',
    last_from timestamptz,
    last_to timestamptz,
    last_fetched integer NOT NULL DEFAULT 0,
    last_recorded integer NOT NULL DEFAULT 0,
    last_already integer NOT NULL DEFAULT 0,
    -- Events appended by the sync, ever: facts the webhooks missed (a counter for metrics).
    missed_total bigint NOT NULL DEFAULT 0,
    subscriptions_checked_at timestamptz,
    subscriptions_error text NOT NULL DEFAULT '',
    -- Subscriptions for webhook_url (or any for this provider when none is known) that are disabled,
    -- plus one when none is active: what the watch found last.
    subscriptions_unhealthy integer NOT NULL DEFAULT 0,
    -- When the provider's newest verified webhook delivery arrived, as the watch last found it among
    -- the newest receipts (a bounded read, so the ingest path writes nothing here).
    last_delivery_at timestamptz
);

CREATE TABLE provider_subscriptions (
    provider text NOT NULL,
    id text NOT NULL,
    url text NOT NULL,
    events text[] NOT NULL DEFAULT '{}',
    state text NOT NULL,
    detail text NOT NULL DEFAULT '',
    checked_at timestamptz NOT NULL,
    PRIMARY KEY (provider, id)
);

CREATE TABLE provider_secrets (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider text NOT NULL,
    subscription_id text NOT NULL DEFAULT '',
    kek_id text NOT NULL,
    sealed bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX provider_secrets_provider_idx ON provider_secrets (provider, id DESC);

CREATE TABLE provider_alerts (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('subscription_disabled', 'missed_webhooks', 'sync_failed')),
    text text NOT NULL,
    data jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at timestamptz,
    error text NOT NULL DEFAULT ''
);

ALTER TABLE reconciliation_items DROP CONSTRAINT reconciliation_items_kind_check;
ALTER TABLE reconciliation_items ADD CONSTRAINT reconciliation_items_kind_check
    CHECK (kind IN ('conflict', 'quarantined', 'late_event', 'step', 'sync'));
