-- Read models fed by the projection runner (projections/, adapters/postgres/readmodel): checkpoints, the
-- calendar with its database-level guard against double booking, payment-only streams, and the
-- reconciliation queue. docs/projections.md explains every table. Nothing here joins the event tables:
-- the event store may live elsewhere (EventStoreDB), only the read models live in PostgreSQL.
-- +goose Up

-- One row per projection. The runner writes it in the same transaction as the read-model changes of
-- the events up to the position, so a crash replays from here without double effects. Positions are
-- the store's (Commit, Prepare) pair as bigint (PostgreSQL: xid8 and global_position; EventStoreDB:
-- commit and prepare positions), compared lexicographically in Go, never in SQL.
CREATE TABLE projection_checkpoints (
    name text PRIMARY KEY,
    commit_position bigint NOT NULL DEFAULT 0 CHECK (commit_position >= 0),
    prepare_position bigint NOT NULL DEFAULT 0 CHECK (prepare_position >= 0),
    -- Events applied since the last rebuild: replaying an event twice would show here.
    events_applied bigint NOT NULL DEFAULT 0 CHECK (events_applied >= 0),
    -- Set by a rebuild until its replay has caught up: reconciliation items are synced once at the
    -- end instead of replaying every transient conflict of the past.
    rebuilding boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- One row per booking stream that has at least one non-payment event. Status is the calendar's:
-- the booking's own fold status, refined by the slot assignment (active or conflict) and by
-- reschedule links (a booking another booking was rescheduled from no longer holds its slot).
CREATE TABLE calendar_bookings (
    booking text PRIMARY KEY,
    provider text NOT NULL,
    meeting text NOT NULL DEFAULT '',
    resources text[] NOT NULL DEFAULT '{}',
    -- NULL when no slot is known (a cancel that arrived before its create).
    during tstzrange CHECK (during IS NULL OR NOT isempty(during)),
    status text NOT NULL
        CONSTRAINT calendar_bookings_status_check
        CHECK (status IN ('pending', 'requested', 'active', 'conflict', 'canceled', 'rejected')),
    -- The booking's own fold status ('' = none yet).
    booking_status text NOT NULL DEFAULT '',
    holder boolean NOT NULL DEFAULT false,
    payment_status text NOT NULL DEFAULT ''
        CHECK (payment_status IN ('', 'failed', 'paid', 'refunded', 'disputed')),
    -- Every payment reference of the booking and of the payment streams linked to it (the closure),
    -- also in calendar_booking_refs, so that a change to any linked payment stream finds the booking.
    payment_refs text[] NOT NULL DEFAULT '{}',
    payment_streams text[] NOT NULL DEFAULT '{}',
    capacity integer NOT NULL DEFAULT 0,
    no_show boolean NOT NULL DEFAULT false,
    scheduled_at timestamptz,
    updated_at timestamptz,
    stream_version bigint NOT NULL DEFAULT 0,
    event_count integer NOT NULL DEFAULT 0,
    rescheduled_from text NOT NULL DEFAULT '',
    rescheduled_to text NOT NULL DEFAULT '',
    cancel_reason text NOT NULL DEFAULT '',
    canceled_by text NOT NULL DEFAULT '',
    cancel_implied boolean NOT NULL DEFAULT false,
    -- booking.Finding list of the fold: [{event, type, occurred_at, code, reason}].
    findings jsonb NOT NULL DEFAULT '[]',
    projected_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT calendar_bookings_holder_is_active CHECK (NOT holder OR status = 'active')
);

-- The calendar query reads by start: a btree on it is an order of magnitude cheaper to maintain than a
-- GiST over the range (rebuilds write every row). A booking longer than a week is found through the
-- small partial GiST instead; readmodel.Calendar asks both (calendarLookBack).
CREATE INDEX calendar_bookings_start_idx ON calendar_bookings ((lower(during)));
CREATE INDEX calendar_bookings_long_idx ON calendar_bookings USING gist (during)
    WHERE upper(during) - lower(during) > interval '7 days';
CREATE INDEX calendar_bookings_rescheduled_from_idx ON calendar_bookings (rescheduled_from)
    WHERE rescheduled_from <> '';

-- Resources (host calendars) by number. The slot table's GiST indexes key on the number: GiST over the
-- resource text (long URIs with a common prefix) costs about ten times as much to maintain. Rows are
-- never deleted, so a number always names the same resource.
CREATE TABLE calendar_resources (
    id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    resource text NOT NULL UNIQUE
);

-- One row per (booking, resource) of every booking that wants its slot (own status active, not
-- superseded by a reschedule). holder marks the rows that hold the slot; the others are in conflict.
-- The exclusion constraint is the double-booking guard: two holders of different meetings never
-- overlap on one resource, whatever the code above it does. Several invitees of one meeting (a group
-- event) share a slot, hence "meeting WITH <>". Ranges are half-open: back-to-back meetings are fine.
CREATE TABLE calendar_slots (
    booking text NOT NULL,
    -- No foreign key: ids come from calendar_resources, and a key check per row would double the cost
    -- of a rebuild's COPY.
    resource_id integer NOT NULL,
    resource text NOT NULL, -- the resource_id's text, kept for readers
    meeting text NOT NULL,
    during tstzrange NOT NULL CHECK (NOT isempty(during)),
    -- The slot-holder rule's key with booking: the provider time the booking was first scheduled.
    priority_at timestamptz NOT NULL,
    holder boolean NOT NULL,
    PRIMARY KEY (booking, resource_id),
    CONSTRAINT calendar_slots_no_double_booking
        EXCLUDE USING gist (resource_id WITH =, during WITH &&, meeting WITH <>) WHERE (holder)
);

-- Finds every claim overlapping a range on a resource (the connected set the holder rule recomputes).
CREATE INDEX calendar_slots_overlap_idx ON calendar_slots USING gist (resource_id, during);

-- Streams whose events are all payment events (Stripe payments without a booking reference live in
-- "booking-stripe-<payment intent>"). They are not calendar bookings; a booking links every payment
-- stream whose refs intersect its own, transitively.
CREATE TABLE payment_streams (
    stream text PRIMARY KEY, -- the stream's booking id, e.g. stripe-pi_…
    refs text[] NOT NULL,
    payment_status text NOT NULL DEFAULT '',
    stream_version bigint NOT NULL DEFAULT 0,
    updated_at timestamptz
);

-- Payment references by value, for both sides of the link: which payment streams carry a reference,
-- and which bookings' closures hold it. A btree answers "ref = ANY($1)" with one descent per value;
-- an array-overlap test over the array columns plans as a scan comparing every row with the whole
-- list, which a rebuild or a burst of payments makes long.
CREATE TABLE payment_stream_refs (
    ref text NOT NULL,
    stream text NOT NULL,
    PRIMARY KEY (ref, stream)
);
CREATE INDEX payment_stream_refs_stream_idx ON payment_stream_refs (stream);

CREATE TABLE calendar_booking_refs (
    ref text NOT NULL,
    booking text NOT NULL,
    PRIMARY KEY (ref, booking)
);
CREATE INDEX calendar_booking_refs_booking_idx ON calendar_booking_refs (booking);

-- The reconciliation queue. Items of kind conflict and late_event are derived from the calendar and
-- opened and closed automatically; quarantined items come from receipts. An item closed by an operator
-- is never reopened for the same subject; one closed automatically is opened anew (a new row) if its
-- cause comes back. Rebuild keeps this table: operators' notes are not in the event log.
CREATE TABLE reconciliation_items (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind text NOT NULL
        CONSTRAINT reconciliation_items_kind_check
        CHECK (kind IN ('conflict', 'quarantined', 'late_event')),
    -- Deterministic identity of the cause: "<booking> <holder>" for a conflict, "<booking> <event id>"
    -- for a late event, "receipt <id>" for a quarantined delivery.
    subject text NOT NULL,
    booking text NOT NULL DEFAULT '',
    other_booking text NOT NULL DEFAULT '',
    event_id uuid,
    receipt_id bigint,
    reason text NOT NULL,
    opened_at timestamptz NOT NULL DEFAULT now(),
    closed_at timestamptz,
    closed_by text CHECK (closed_by IN ('operator', 'auto')),
    -- The operator's resolution note, or the automatic closing note.
    note text NOT NULL DEFAULT '',
    CONSTRAINT reconciliation_items_closed_consistent CHECK ((closed_at IS NULL) = (closed_by IS NULL))
);

CREATE UNIQUE INDEX reconciliation_items_one_open_idx ON reconciliation_items (kind, subject)
    WHERE closed_at IS NULL;
CREATE INDEX reconciliation_items_booking_idx ON reconciliation_items (booking);
CREATE INDEX reconciliation_items_other_booking_idx ON reconciliation_items (other_booking)
    WHERE other_booking <> '';
CREATE INDEX reconciliation_items_open_idx ON reconciliation_items (opened_at) WHERE closed_at IS NULL;
CREATE INDEX reconciliation_items_subject_idx ON reconciliation_items (kind, subject);
CREATE INDEX reconciliation_items_receipt_idx ON reconciliation_items (receipt_id) WHERE receipt_id IS NOT NULL;
