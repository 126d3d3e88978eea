-- Process steps (docs/process-steps.md, ADR 0010): what bookingledger did about each booking — the host's
-- calendar event over CalDAV and the invitee's email over SMTP — one row per effect, each with its own
-- idempotency key. The process projection (adapters/process) inserts the rows and their River jobs in
-- the transaction that advances its checkpoint; the workers move them through their states. River's job
-- rows are not the record: River deletes them, these rows stay.
--
-- contacts holds the invitee's email address and name, extracted by each provider's mapper at ingress.
-- Personal data never enters the immutable events; erasing a person is deleting their contacts row.
--
-- reconciliation_items gets kind 'step' (a step whose outcome is unknown, subject "step <key>"); the new
-- check is a strict superset of 0010's, so every stored row passes it.
-- +goose Up

CREATE TABLE process_steps (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- UUIDv5 over (thread, kind, the state the step answers): the CalDAV object's UID and path, the
    -- email's Message-ID. Re-planning the same state finds the key; a new state is a new key.
    key uuid NOT NULL UNIQUE,
    kind text NOT NULL CHECK (kind IN ('host_calendar.create', 'host_calendar.update', 'host_calendar.delete',
        'invitee_email.confirmation', 'invitee_email.rescheduled', 'invitee_email.cancellation')),
    -- The first booking of a reschedule chain: one calendar object and one conversation per thread.
    thread text NOT NULL,
    -- The booking whose state the step answers (the chain's latest, or the canceled one).
    booking text NOT NULL,
    state text NOT NULL DEFAULT 'pending'
        CONSTRAINT process_steps_state_check
        CHECK (state IN ('pending', 'requested', 'done', 'needs_reconciliation', 'failed', 'skipped')),
    -- The state answered, for people: e.g. "active 2027-03-15T10:00:00Z–2027-03-15T10:30:00Z".
    answers text NOT NULL,
    -- The step on the same target this one must follow (an update follows the create, …).
    after_key uuid,
    resource text NOT NULL DEFAULT '',
    slot_start timestamptz,
    slot_end timestamptz,
    attempts integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- While requested: the worker that committed 'requested' owns the call until then; afterwards the
    -- outcome is unknown and the next worker probes (or asks an operator).
    lease_until timestamptz,
    -- CalDAV: the object's URL and the ETag the server returned for our last write.
    target_href text NOT NULL DEFAULT '',
    target_etag text NOT NULL DEFAULT '',
    last_error text NOT NULL DEFAULT '',
    -- Why the step ended as it did (skipped, failed, resolved by an operator).
    note text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    requested_at timestamptz,
    finished_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX process_steps_thread_idx ON process_steps (thread);
CREATE INDEX process_steps_booking_idx ON process_steps (booking);
-- The sweeper's and `steps --state` query: the few steps not finished.
CREATE INDEX process_steps_open_idx ON process_steps (state, updated_at)
    WHERE state IN ('pending', 'requested', 'needs_reconciliation');

CREATE TABLE contacts (
    booking text PRIMARY KEY,
    email text NOT NULL,
    name text NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE reconciliation_items DROP CONSTRAINT reconciliation_items_kind_check;
ALTER TABLE reconciliation_items ADD CONSTRAINT reconciliation_items_kind_check
    CHECK (kind IN ('conflict', 'quarantined', 'late_event', 'step'));
