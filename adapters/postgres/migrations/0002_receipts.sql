-- Receipts: one row per delivery attempt, whatever its outcome, written in the same transaction as the
-- events it appended (Store.Commit) so that an acknowledged delivery always has both.
-- +goose Up

CREATE TABLE receipts (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider text NOT NULL,
    received_at timestamptz NOT NULL,
    -- The provider's identity of the delivery; '' when it has none (some rejected requests).
    delivery_id text NOT NULL DEFAULT '',
    -- Which configured secret verified the delivery (an index or fingerprint, never the secret).
    secret_ref text NOT NULL DEFAULT '',
    outcome text NOT NULL
        CONSTRAINT receipts_outcome_check
        CHECK (outcome IN ('accepted', 'duplicate', 'ignored', 'quarantined', 'rejected')),
    reason text NOT NULL DEFAULT '',
    -- The delivery's events as parallel arrays: element i of each names event i.
    bookings text[] NOT NULL DEFAULT '{}',
    streams text[] NOT NULL DEFAULT '{}',
    event_ids uuid[] NOT NULL DEFAULT '{}',
    event_types text[] NOT NULL DEFAULT '{}',
    -- The raw verified body; never kept for an unverified request.
    body bytea,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT receipts_rejected_without_body CHECK (outcome <> 'rejected' OR body IS NULL),
    CONSTRAINT receipts_event_refs_parallel CHECK (
        cardinality(streams) = cardinality(bookings)
        AND cardinality(event_ids) = cardinality(bookings)
        AND cardinality(event_types) = cardinality(bookings))
);

CREATE INDEX receipts_delivery_id_idx ON receipts (delivery_id);
-- Auditors read every receipt of a booking: bookings @> ARRAY[$1].
CREATE INDEX receipts_bookings_idx ON receipts USING gin (bookings);
-- The operators' quarantine list: outcome = 'quarantined' ORDER BY received_at.
CREATE INDEX receipts_outcome_received_at_idx ON receipts (outcome, received_at);
