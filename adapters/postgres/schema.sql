-- The schema the migrations in migrations/ make of an empty database (pg_dump --schema-only,
-- normalised). Generated: do not edit. After adding a migration run `make schema`
-- (scripts/schema.sh); TestSchemaSnapshot fails while this file and the migrations differ.

CREATE EXTENSION IF NOT EXISTS btree_gist WITH SCHEMA public;

CREATE FUNCTION public.bl_append(p_stream text, p_expected_kind text, p_expected_version bigint, p_ids uuid[], p_types text[], p_data bytea[], p_metadata bytea[], OUT first_version bigint, OUT last_version bigint, OUT tx_id xid8, OUT global_position bigint, OUT duplicate boolean) RETURNS record
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    n int := coalesce(cardinality(p_ids), 0);
    cur bigint;
    inserted int;
    pos bigint;
    stored int := 0;
    in_order boolean := true;
    found_stream text;
    found_offset bigint;
    base bigint;
BEGIN
    IF coalesce(p_stream, '') = '' OR n = 0
        OR coalesce(cardinality(p_types), 0) <> n
        OR coalesce(cardinality(p_data), 0) <> n
        OR coalesce(cardinality(p_metadata), 0) <> n THEN
        RAISE EXCEPTION USING ERRCODE = 'BL003',
            MESSAGE = format('malformed append to %s: %s ids, %s types, %s data, %s metadata', p_stream,
                n, cardinality(p_types), cardinality(p_data), cardinality(p_metadata));
    END IF;
    IF p_expected_kind IS NULL OR p_expected_kind NOT IN ('any', 'no_stream', 'stream_exists', 'exact')
        OR (p_expected_kind = 'exact' AND (p_expected_version IS NULL OR p_expected_version < 0)) THEN
        RAISE EXCEPTION USING ERRCODE = 'BL003',
            MESSAGE = format('malformed expected version %s(%s)', p_expected_kind, p_expected_version);
    END IF;

    -- Lock the stream row and claim versions cur+1..cur+n in one statement. The row lock serializes the
    -- stream's writers until commit; a failed check below raises, which undoes the claim with the rest
    -- of the transaction. A new stream is created by the INSERT, whose uncommitted row serializes too:
    -- a concurrent INSERT of the same key waits for this transaction, then does nothing and takes the
    -- UPDATE. An append expecting a new stream tries the INSERT first, the others the UPDATE, so that
    -- the expected case is one statement.
    IF p_expected_kind = 'no_stream' OR (p_expected_kind = 'exact' AND p_expected_version = 0) THEN
        INSERT INTO streams AS s (stream_id, version) VALUES (p_stream, n)
        ON CONFLICT (stream_id) DO NOTHING
        RETURNING 0 INTO cur;
    END IF;
    IF cur IS NULL THEN
        UPDATE streams AS s SET version = s.version + n WHERE s.stream_id = p_stream
        RETURNING s.version - n INTO cur;
    END IF;
    IF cur IS NULL THEN
        INSERT INTO streams AS s (stream_id, version) VALUES (p_stream, n)
        ON CONFLICT (stream_id) DO NOTHING
        RETURNING 0 INTO cur;
    END IF;
    IF cur IS NULL THEN -- created concurrently between our UPDATE and INSERT
        UPDATE streams AS s SET version = s.version + n WHERE s.stream_id = p_stream
        RETURNING s.version - n INTO cur;
    END IF;
    IF cur IS NULL THEN
        RAISE EXCEPTION 'stream % could not be locked', p_stream; -- rows of streams are never deleted
    END IF;

    -- Idempotency goes before the expectation: a retried append must succeed even though the stream
    -- moved on since. When the expectation holds, the events are inserted at once, and ON CONFLICT on
    -- event_id tells in the same statement whether an ID is stored already (also by a concurrent append
    -- to another stream, which it waits for), so the common case needs no separate lookup. Row by row,
    -- so that global positions follow versions within the append; one plan per statement whatever the
    -- array, so PL/pgSQL caches it.
    IF (CASE p_expected_kind
            WHEN 'no_stream' THEN cur = 0
            WHEN 'stream_exists' THEN cur > 0
            WHEN 'exact' THEN cur = p_expected_version
            ELSE true
        END) THEN
        inserted := 0;
        FOR k IN 1 .. n LOOP
            INSERT INTO events (stream_id, version, event_id, event_type, data, metadata)
            VALUES (p_stream, cur + k, p_ids[k], p_types[k], p_data[k], p_metadata[k])
            ON CONFLICT (event_id) DO NOTHING
            RETURNING events.global_position INTO pos;
            IF FOUND THEN
                inserted := inserted + 1;
                global_position := pos;
            END IF;
        END LOOP;
        IF inserted = n THEN
            first_version := cur + 1;
            last_version := cur + n;
            tx_id := pg_current_xact_id();
            duplicate := false;
            RETURN;
        END IF;
        IF inserted > 0 THEN
            RAISE EXCEPTION USING ERRCODE = 'BL002',
                MESSAGE = format('%s of %s event IDs are stored already, not as one earlier append to %s',
                    n - inserted, n, p_stream);
        END IF;
        -- Nothing inserted: every ID is stored. The lookup below says whether as this very append.
    END IF;

    FOR k IN 1 .. n LOOP
        SELECT e.stream_id, e.version - k INTO found_stream, found_offset FROM events e WHERE e.event_id = p_ids[k];
        IF FOUND THEN
            stored := stored + 1;
            IF found_stream <> p_stream OR (base IS NOT NULL AND found_offset <> base) THEN
                in_order := false;
            END IF;
            base := found_offset;
        END IF;
    END LOOP;
    IF stored = n AND in_order THEN
        UPDATE streams AS s SET version = cur WHERE s.stream_id = p_stream; -- give the claim back
        first_version := base + 1;
        last_version := base + n;
        duplicate := true;
        SELECT e.tx_id, e.global_position INTO tx_id, global_position
          FROM events e WHERE e.event_id = p_ids[n];
        RETURN;
    END IF;
    IF stored > 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'BL002',
            MESSAGE = format('%s of %s event IDs are stored already, not as one earlier append to %s',
                stored, n, p_stream);
    END IF;
    RAISE EXCEPTION USING ERRCODE = 'BL001',
        MESSAGE = format('stream %s is at version %s, expected %s', p_stream, cur,
            CASE p_expected_kind WHEN 'exact' THEN format('exact(%s)', p_expected_version)
                ELSE replace(p_expected_kind, '_', '-') END),
        DETAIL = cur::text;
END
$$;

CREATE FUNCTION public.bl_appends(p_streams text[], p_kinds text[], p_versions bigint[], p_counts integer[], p_ids uuid[], p_types text[], p_data bytea[], p_metadata bytea[], OUT status text, OUT message text, OUT detail text, OUT first_versions bigint[], OUT last_versions bigint[], OUT tx_ids xid8[], OUT positions bigint[], OUT duplicates boolean[]) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    n int := coalesce(cardinality(p_streams), 0);
    off int := 0;
    r record;
BEGIN
    IF n = 1 AND p_counts[1] = coalesce(cardinality(p_ids), 0) THEN
        r := bl_append(p_streams[1], p_kinds[1], p_versions[1], p_ids, p_types, p_data, p_metadata);
        first_versions := ARRAY[r.first_version];
        last_versions := ARRAY[r.last_version];
        tx_ids := ARRAY[r.tx_id];
        positions := ARRAY[r.global_position];
        duplicates := ARRAY[r.duplicate];
        status := 'ok';
        RETURN;
    END IF;
    first_versions := '{}';
    last_versions := '{}';
    tx_ids := '{}';
    positions := '{}';
    duplicates := '{}';
    FOR k IN 1 .. n LOOP
        r := bl_append(p_streams[k], p_kinds[k], p_versions[k],
            p_ids[off + 1 : off + p_counts[k]], p_types[off + 1 : off + p_counts[k]],
            p_data[off + 1 : off + p_counts[k]], p_metadata[off + 1 : off + p_counts[k]]);
        first_versions := first_versions || r.first_version;
        last_versions := last_versions || r.last_version;
        tx_ids := tx_ids || r.tx_id;
        positions := positions || r.global_position;
        duplicates := duplicates || r.duplicate;
        off := off + p_counts[k];
    END LOOP;
    status := 'ok';
END
$$;

CREATE FUNCTION public.bl_checkpoint_moved(projection text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'BL004',
        MESSAGE = format('checkpoint of projection %s moved', projection);
END
$$;

CREATE FUNCTION public.bl_count_step_finishes() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.state IN ('done', 'failed', 'skipped') THEN
        INSERT INTO process_step_finishes (kind, state, n) VALUES (OLD.kind, OLD.state, -1);
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.state IN ('done', 'failed', 'skipped') THEN
        INSERT INTO process_step_finishes (kind, state, n) VALUES (NEW.kind, NEW.state, 1);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION public.bl_erasure_lock_key(subject text) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT hashtextextended('bl-erase:' || subject, 0)
$$;

CREATE FUNCTION public.bl_overlapping_claims(p_resource integer, p_during tstzrange) RETURNS SETOF text
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
SELECT booking FROM calendar_slots
WHERE resource_id = p_resource AND lower(during) >= lower(p_during) - interval '7 days'
    AND lower(during) < upper(p_during) AND upper(during) > lower(p_during) AND during && p_during
UNION ALL
SELECT booking FROM calendar_slots
WHERE resource_id = p_resource AND during && p_during AND upper(during) - lower(during) > interval '7 days'
    AND lower(during) < lower(p_during) - interval '7 days'
$$;

CREATE FUNCTION public.bl_step_finishes_truncated() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM process_step_finishes;
    RETURN NULL;
END
$$;

CREATE FUNCTION public.bl_subject_erased(s text) RETURNS boolean
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(bl_erasure_lock_key(s));
    RETURN EXISTS (SELECT 1 FROM erased_subjects e WHERE e.subject = s);
END
$$;

CREATE FUNCTION public.bl_try_appends(p_streams text[], p_kinds text[], p_versions bigint[], p_counts integer[], p_ids uuid[], p_types text[], p_data bytea[], p_metadata bytea[], OUT status text, OUT message text, OUT detail text, OUT first_versions bigint[], OUT last_versions bigint[], OUT tx_ids xid8[], OUT positions bigint[], OUT duplicates boolean[]) RETURNS record
    LANGUAGE plpgsql
    AS $$
DECLARE
    r record;
BEGIN
    r := bl_appends(p_streams, p_kinds, p_versions, p_counts, p_ids, p_types, p_data, p_metadata);
    status := r.status;
    message := r.message;
    detail := r.detail;
    first_versions := r.first_versions;
    last_versions := r.last_versions;
    tx_ids := r.tx_ids;
    positions := r.positions;
    duplicates := r.duplicates;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS status = RETURNED_SQLSTATE, message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
    first_versions := NULL;
    last_versions := NULL;
    tx_ids := NULL;
    positions := NULL;
    duplicates := NULL;
END
$$;

CREATE FUNCTION public.receipt_body(inline bytea, digest bytea) RETURNS bytea
    LANGUAGE sql STABLE
    AS $$
    SELECT coalesce(inline, (SELECT b.body FROM receipt_bodies b WHERE b.digest = receipt_body.digest))
$$;

CREATE FUNCTION public.receipt_body_erased_at(inline bytea, inline_erased_at timestamp with time zone, digest bytea) RETURNS timestamp with time zone
    LANGUAGE sql STABLE
    AS $$
    SELECT CASE WHEN inline IS NOT NULL THEN inline_erased_at
        ELSE (SELECT b.erased_at FROM receipt_bodies b WHERE b.digest = receipt_body_erased_at.digest) END
$$;

CREATE FUNCTION public.receipt_body_put(sealed bytea, d bytea, key_id uuid, subj text, kek text, wrapped bytea) RETURNS bytea
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF sealed IS NULL THEN
        RETURN NULL;
    END IF;
    IF subj IS NOT NULL AND bl_subject_erased(subj) THEN
        RETURN NULL;
    END IF;
    IF key_id IS NOT NULL THEN
        INSERT INTO subject_keys (id, subject, kek_id, wrapped) VALUES (key_id, subj, kek, wrapped) ON CONFLICT (id) DO NOTHING;
    END IF;
    -- A body stored in plain text before 0131 is sealed when it comes again, unless it was erased.
    INSERT INTO receipt_bodies (digest, body, subject, key_id) VALUES (d, sealed, subj, key_id)
    ON CONFLICT (digest) DO UPDATE SET body = EXCLUDED.body, subject = EXCLUDED.subject, key_id = EXCLUDED.key_id
    WHERE receipt_bodies.key_id IS NULL AND receipt_bodies.subject IS NULL AND EXCLUDED.key_id IS NOT NULL
        AND receipt_bodies.erased_at IS NULL;
    RETURN d;
END
$$;

CREATE TABLE public.api_tokens (
    id text NOT NULL,
    name text NOT NULL,
    scope text NOT NULL,
    secret_sha256 bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    revoked_at timestamp with time zone,
    last_used_at timestamp with time zone,
    CONSTRAINT api_tokens_id_check CHECK ((id ~ '^[0-9a-f]{12}$'::text)),
    CONSTRAINT api_tokens_name_check CHECK (((length(name) >= 1) AND (length(name) <= 64))),
    CONSTRAINT api_tokens_scope_check CHECK ((scope = ANY (ARRAY['read'::text, 'admin'::text]))),
    CONSTRAINT api_tokens_secret_sha256_check CHECK ((length(secret_sha256) = 32))
);

CREATE TABLE public.calendar_booking_refs (
    ref text NOT NULL,
    booking text NOT NULL
);

CREATE TABLE public.calendar_bookings (
    booking text NOT NULL,
    provider text NOT NULL,
    meeting text DEFAULT ''::text NOT NULL,
    resources text[] DEFAULT '{}'::text[] NOT NULL,
    during tstzrange,
    status text NOT NULL,
    booking_status text DEFAULT ''::text NOT NULL,
    holder boolean DEFAULT false NOT NULL,
    payment_status text DEFAULT ''::text NOT NULL,
    payment_refs text[] DEFAULT '{}'::text[] NOT NULL,
    payment_streams text[] DEFAULT '{}'::text[] NOT NULL,
    capacity integer DEFAULT 0 NOT NULL,
    no_show boolean DEFAULT false NOT NULL,
    scheduled_at timestamp with time zone,
    updated_at timestamp with time zone,
    stream_version bigint DEFAULT 0 NOT NULL,
    event_count integer DEFAULT 0 NOT NULL,
    rescheduled_from text DEFAULT ''::text NOT NULL,
    rescheduled_to text DEFAULT ''::text NOT NULL,
    cancel_reason text DEFAULT ''::text NOT NULL,
    canceled_by text DEFAULT ''::text NOT NULL,
    cancel_implied boolean DEFAULT false NOT NULL,
    findings jsonb DEFAULT '[]'::jsonb NOT NULL,
    projected_at timestamp with time zone DEFAULT now() NOT NULL,
    series text DEFAULT ''::text NOT NULL,
    seats text[],
    seats_left text[],
    CONSTRAINT calendar_bookings_during_check CHECK (((during IS NULL) OR (NOT isempty(during)))),
    CONSTRAINT calendar_bookings_holder_is_active CHECK (((NOT holder) OR (status = 'active'::text))),
    CONSTRAINT calendar_bookings_payment_status_check CHECK ((payment_status = ANY (ARRAY[''::text, 'failed'::text, 'paid'::text, 'refunded'::text, 'disputed'::text]))),
    CONSTRAINT calendar_bookings_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'requested'::text, 'active'::text, 'conflict'::text, 'canceled'::text, 'rejected'::text])))
);

CREATE TABLE public.calendar_resource_links (
    resource text NOT NULL,
    name text NOT NULL
);

CREATE TABLE public.calendar_resources (
    id integer NOT NULL,
    resource text NOT NULL
);

ALTER TABLE public.calendar_resources ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.calendar_resources_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.calendar_slots (
    booking text NOT NULL,
    resource_id integer NOT NULL,
    resource text NOT NULL,
    meeting text NOT NULL,
    during tstzrange NOT NULL,
    priority_at timestamp with time zone NOT NULL,
    holder boolean NOT NULL,
    guarded boolean DEFAULT true NOT NULL,
    CONSTRAINT calendar_slots_during_check CHECK ((NOT isempty(during)))
);

CREATE TABLE public.contacts (
    booking text NOT NULL,
    email text NOT NULL,
    name text DEFAULT ''::text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    time_zone text DEFAULT ''::text NOT NULL
);

CREATE TABLE public.erased_subjects (
    subject text NOT NULL,
    erasure bigint NOT NULL,
    erased_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.erasures (
    id bigint NOT NULL,
    kind text DEFAULT 'subject.erased'::text NOT NULL,
    erased_at timestamp with time zone DEFAULT now() NOT NULL,
    erased_by text NOT NULL,
    bookings text[] NOT NULL,
    counts jsonb NOT NULL,
    CONSTRAINT erasures_kind_check CHECK ((kind = ANY (ARRAY['subject.erased'::text, 'retention'::text])))
);

ALTER TABLE public.erasures ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.erasures_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.events (
    global_position bigint NOT NULL,
    tx_id xid8 DEFAULT pg_current_xact_id() NOT NULL,
    stream_id text NOT NULL,
    version bigint NOT NULL,
    event_id uuid NOT NULL,
    event_type text NOT NULL,
    data bytea,
    metadata bytea,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT events_event_type_check CHECK ((event_type <> ''::text)),
    CONSTRAINT events_version_check CHECK ((version > 0))
);

ALTER TABLE public.events ALTER COLUMN global_position ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.events_global_position_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.free_texts (
    event uuid NOT NULL,
    field text NOT NULL,
    booking text NOT NULL,
    text text NOT NULL,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL,
    erased_at timestamp with time zone,
    CONSTRAINT free_texts_erased_is_empty CHECK (((erased_at IS NULL) OR (text = ''::text))),
    CONSTRAINT free_texts_field_check CHECK ((field = ANY (ARRAY['cancel_reason'::text, 'reject_reason'::text])))
);

CREATE TABLE public.job_instances (
    id integer NOT NULL,
    client_id text NOT NULL,
    started_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE SEQUENCE public.job_instances_id_seq
    AS integer
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.job_instances_id_seq OWNED BY public.job_instances.id;

CREATE TABLE public.payment_stream_refs (
    ref text NOT NULL,
    stream text NOT NULL
);

CREATE TABLE public.payment_streams (
    stream text NOT NULL,
    refs text[] NOT NULL,
    payment_status text DEFAULT ''::text NOT NULL,
    stream_version bigint DEFAULT 0 NOT NULL,
    updated_at timestamp with time zone
);

CREATE TABLE public.process_step_finishes (
    kind text NOT NULL,
    state text NOT NULL,
    n bigint NOT NULL,
    CONSTRAINT process_step_finishes_state_check CHECK ((state = ANY (ARRAY['done'::text, 'failed'::text, 'skipped'::text])))
);

CREATE TABLE public.process_steps (
    id bigint NOT NULL,
    key uuid NOT NULL,
    kind text NOT NULL,
    thread text NOT NULL,
    booking text NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    answers text NOT NULL,
    after_key uuid,
    resource text DEFAULT ''::text NOT NULL,
    slot_start timestamp with time zone,
    slot_end timestamp with time zone,
    attempts integer DEFAULT 0 NOT NULL,
    lease_until timestamp with time zone,
    target_href text DEFAULT ''::text NOT NULL,
    target_etag text DEFAULT ''::text NOT NULL,
    last_error text DEFAULT ''::text NOT NULL,
    note text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    requested_at timestamp with time zone,
    finished_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    claimed_by text,
    data_sent_at timestamp with time zone,
    seat text DEFAULT ''::text NOT NULL,
    attendees text DEFAULT ''::text NOT NULL,
    CONSTRAINT process_steps_attempts_check CHECK ((attempts >= 0)),
    CONSTRAINT process_steps_kind_check CHECK ((kind = ANY (ARRAY['host_calendar.create'::text, 'host_calendar.update'::text, 'host_calendar.delete'::text, 'invitee_email.confirmation'::text, 'invitee_email.rescheduled'::text, 'invitee_email.cancellation'::text, 'invitee_email.seat_cancellation'::text]))),
    CONSTRAINT process_steps_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'requested'::text, 'done'::text, 'needs_reconciliation'::text, 'failed'::text, 'skipped'::text])))
);

ALTER TABLE public.process_steps ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.process_steps_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.projection_checkpoints (
    name text NOT NULL,
    commit_position bigint DEFAULT 0 NOT NULL,
    prepare_position bigint DEFAULT 0 NOT NULL,
    events_applied bigint DEFAULT 0 NOT NULL,
    rebuilding boolean DEFAULT false NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT projection_checkpoints_commit_position_check CHECK ((commit_position >= 0)),
    CONSTRAINT projection_checkpoints_events_applied_check CHECK ((events_applied >= 0)),
    CONSTRAINT projection_checkpoints_prepare_position_check CHECK ((prepare_position >= 0))
);

CREATE TABLE public.provider_alerts (
    id bigint NOT NULL,
    provider text NOT NULL,
    kind text NOT NULL,
    text text NOT NULL,
    data jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    sent_at timestamp with time zone,
    error text DEFAULT ''::text NOT NULL,
    CONSTRAINT provider_alerts_kind_check CHECK ((kind = ANY (ARRAY['subscription_disabled'::text, 'missed_webhooks'::text, 'sync_failed'::text])))
);

ALTER TABLE public.provider_alerts ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.provider_alerts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.provider_secrets (
    id bigint NOT NULL,
    provider text NOT NULL,
    subscription_id text DEFAULT ''::text NOT NULL,
    kek_id text NOT NULL,
    sealed bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

ALTER TABLE public.provider_secrets ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.provider_secrets_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.provider_subscriptions (
    provider text NOT NULL,
    id text NOT NULL,
    url text NOT NULL,
    events text[] DEFAULT '{}'::text[] NOT NULL,
    state text NOT NULL,
    detail text DEFAULT ''::text NOT NULL,
    checked_at timestamp with time zone NOT NULL
);

CREATE TABLE public.provider_sync_state (
    provider text NOT NULL,
    webhook_url text DEFAULT ''::text NOT NULL,
    cursor text DEFAULT ''::text NOT NULL,
    last_run_at timestamp with time zone,
    last_ok_at timestamp with time zone,
    last_error text DEFAULT ''::text NOT NULL,
    last_from timestamp with time zone,
    last_to timestamp with time zone,
    last_fetched integer DEFAULT 0 NOT NULL,
    last_recorded integer DEFAULT 0 NOT NULL,
    last_already integer DEFAULT 0 NOT NULL,
    missed_total bigint DEFAULT 0 NOT NULL,
    subscriptions_checked_at timestamp with time zone,
    subscriptions_error text DEFAULT ''::text NOT NULL,
    subscriptions_unhealthy integer DEFAULT 0 NOT NULL,
    last_delivery_at timestamp with time zone
);

CREATE TABLE public.receipt_bodies (
    digest bytea NOT NULL,
    body bytea NOT NULL,
    subject text,
    key_id uuid,
    stored_at timestamp with time zone DEFAULT now() NOT NULL,
    erased_at timestamp with time zone,
    CONSTRAINT receipt_bodies_digest_is_sha256 CHECK ((octet_length(digest) = 32))
);

CREATE TABLE public.receipts (
    id bigint NOT NULL,
    provider text NOT NULL,
    received_at timestamp with time zone NOT NULL,
    delivery_id text DEFAULT ''::text NOT NULL,
    secret_ref text DEFAULT ''::text NOT NULL,
    outcome text NOT NULL,
    reason text DEFAULT ''::text NOT NULL,
    bookings text[] DEFAULT '{}'::text[] NOT NULL,
    streams text[] DEFAULT '{}'::text[] NOT NULL,
    event_ids uuid[] DEFAULT '{}'::uuid[] NOT NULL,
    event_types text[] DEFAULT '{}'::text[] NOT NULL,
    body bytea,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL,
    pending_booking text DEFAULT ''::text NOT NULL,
    body_digest bytea,
    repeats integer DEFAULT 1 NOT NULL,
    last_received_at timestamp with time zone,
    headers text[] DEFAULT '{}'::text[] NOT NULL,
    body_erased_at timestamp with time zone,
    CONSTRAINT receipts_event_refs_parallel CHECK (((cardinality(streams) = cardinality(bookings)) AND (cardinality(event_ids) = cardinality(bookings)) AND (cardinality(event_types) = cardinality(bookings)))),
    CONSTRAINT receipts_outcome_check CHECK ((outcome = ANY (ARRAY['accepted'::text, 'duplicate'::text, 'ignored'::text, 'quarantined'::text, 'rejected'::text, 'deferred'::text]))),
    CONSTRAINT receipts_rejected_without_body CHECK (((outcome <> 'rejected'::text) OR (body IS NULL))),
    CONSTRAINT receipts_rejected_without_body_digest CHECK (((outcome <> 'rejected'::text) OR (body_digest IS NULL))),
    CONSTRAINT receipts_repeats_positive CHECK ((repeats >= 1))
);

ALTER TABLE public.receipts ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.receipts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.reconciliation_items (
    id bigint NOT NULL,
    kind text NOT NULL,
    subject text NOT NULL,
    booking text DEFAULT ''::text NOT NULL,
    other_booking text DEFAULT ''::text NOT NULL,
    event_id uuid,
    receipt_id bigint,
    reason text NOT NULL,
    opened_at timestamp with time zone DEFAULT now() NOT NULL,
    closed_at timestamp with time zone,
    closed_by text,
    note text DEFAULT ''::text NOT NULL,
    resolved_by text DEFAULT ''::text NOT NULL,
    CONSTRAINT reconciliation_items_closed_by_check CHECK ((closed_by = ANY (ARRAY['operator'::text, 'auto'::text]))),
    CONSTRAINT reconciliation_items_closed_consistent CHECK (((closed_at IS NULL) = (closed_by IS NULL))),
    CONSTRAINT reconciliation_items_kind_check CHECK ((kind = ANY (ARRAY['conflict'::text, 'quarantined'::text, 'late_event'::text, 'step'::text, 'sync'::text])))
);

ALTER TABLE public.reconciliation_items ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.reconciliation_items_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.relay_alerts (
    id bigint NOT NULL,
    endpoint_id bigint NOT NULL,
    kind text NOT NULL,
    failures integer NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    sent_at timestamp with time zone,
    error text DEFAULT ''::text NOT NULL,
    disabled boolean DEFAULT false NOT NULL,
    CONSTRAINT relay_alerts_kind_check CHECK ((kind = ANY (ARRAY['failing'::text, 'recovered'::text])))
);

ALTER TABLE public.relay_alerts ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.relay_alerts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.relay_attempts (
    id bigint NOT NULL,
    delivery_id bigint NOT NULL,
    attempt integer NOT NULL,
    replay_id bigint,
    at timestamp with time zone NOT NULL,
    status integer,
    latency_ms double precision NOT NULL,
    succeeded boolean NOT NULL,
    response text DEFAULT ''::text NOT NULL,
    error text DEFAULT ''::text NOT NULL
);

ALTER TABLE public.relay_attempts ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.relay_attempts_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.relay_deliveries (
    id bigint NOT NULL,
    endpoint_id bigint NOT NULL,
    event_id uuid NOT NULL,
    booking text NOT NULL,
    stream text NOT NULL,
    stream_version bigint NOT NULL,
    event_type text NOT NULL,
    recorded_at timestamp with time zone NOT NULL,
    state text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    run_attempts integer DEFAULT 0 NOT NULL,
    replay_id bigint,
    next_attempt_at timestamp with time zone,
    last_status integer,
    last_error text DEFAULT ''::text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    completed_at timestamp with time zone,
    held text,
    CONSTRAINT relay_deliveries_held_check CHECK ((held = ANY (ARRAY['order'::text, 'breaker'::text]))),
    CONSTRAINT relay_deliveries_state_check CHECK ((state = ANY (ARRAY['pending'::text, 'paused'::text, 'succeeded'::text, 'dead'::text])))
);

ALTER TABLE public.relay_deliveries ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.relay_deliveries_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.relay_endpoint_rules (
    endpoint_id bigint NOT NULL,
    since timestamp with time zone NOT NULL,
    types text[] DEFAULT '{}'::text[] NOT NULL,
    filter text DEFAULT ''::text NOT NULL
);

CREATE TABLE public.relay_endpoints (
    id bigint NOT NULL,
    url text NOT NULL,
    types text[] DEFAULT '{}'::text[] NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    secret text NOT NULL,
    previous_secret text,
    previous_until timestamp with time zone,
    disabled_at timestamp with time zone,
    disabled_reason text DEFAULT ''::text NOT NULL,
    consecutive_failures integer DEFAULT 0 NOT NULL,
    alerted_failures integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_success_at timestamp with time zone,
    last_failure_at timestamp with time zone,
    ordered boolean DEFAULT false NOT NULL,
    rate_per_second double precision DEFAULT 0 NOT NULL,
    concurrency integer DEFAULT 0 NOT NULL,
    breaker_failures integer DEFAULT 5 NOT NULL,
    disable_after_ms bigint DEFAULT 432000000 NOT NULL,
    failing_since timestamp with time zone,
    probe_delivery bigint,
    probe_at timestamp with time zone,
    probes integer DEFAULT 0 NOT NULL,
    throttle_next_at timestamp with time zone,
    auto_disabled boolean DEFAULT false NOT NULL,
    filter text DEFAULT ''::text NOT NULL,
    CONSTRAINT relay_endpoints_breaker_failures_check CHECK ((breaker_failures >= 0)),
    CONSTRAINT relay_endpoints_concurrency_check CHECK ((concurrency >= 0)),
    CONSTRAINT relay_endpoints_disable_after_ms_check CHECK ((disable_after_ms >= 0)),
    CONSTRAINT relay_endpoints_rate_per_second_check CHECK ((rate_per_second >= (0)::double precision))
);

ALTER TABLE public.relay_endpoints ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.relay_endpoints_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.relay_operational_sends (
    id bigint NOT NULL,
    webhook_id text NOT NULL,
    type text NOT NULL,
    about_endpoint bigint,
    target_endpoint bigint,
    at timestamp with time zone NOT NULL,
    text text NOT NULL,
    data jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    sent_at timestamp with time zone,
    error text DEFAULT ''::text NOT NULL
);

ALTER TABLE public.relay_operational_sends ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.relay_operational_sends_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.relay_replays (
    id bigint NOT NULL,
    endpoint_id bigint NOT NULL,
    from_time timestamp with time zone NOT NULL,
    to_time timestamp with time zone NOT NULL,
    types text[] DEFAULT '{}'::text[] NOT NULL,
    only_failed boolean NOT NULL,
    total integer NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    rate double precision DEFAULT 0 NOT NULL
);

ALTER TABLE public.relay_replays ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.relay_replays_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.schema_migrations (
    id integer NOT NULL,
    version_id bigint NOT NULL,
    is_applied boolean NOT NULL,
    tstamp timestamp without time zone DEFAULT now() NOT NULL
);

ALTER TABLE public.schema_migrations ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME public.schema_migrations_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.seat_contacts (
    booking text NOT NULL,
    seat text NOT NULL,
    email text NOT NULL,
    name text DEFAULT ''::text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    time_zone text DEFAULT ''::text NOT NULL,
    CONSTRAINT seat_contacts_seat_check CHECK ((seat <> ''::text))
);

CREATE TABLE public.streams (
    stream_id text NOT NULL,
    version bigint NOT NULL,
    CONSTRAINT streams_version_check CHECK ((version >= 0))
)
WITH (fillfactor='70');

CREATE TABLE public.subject_keys (
    id uuid NOT NULL,
    subject text NOT NULL,
    kek_id text NOT NULL,
    wrapped bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

CREATE TABLE public.ui_sessions (
    cookie_sha256 bytea NOT NULL,
    token_id text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT ui_sessions_cookie_sha256_check CHECK ((length(cookie_sha256) = 32))
);

ALTER TABLE ONLY public.job_instances ALTER COLUMN id SET DEFAULT nextval('public.job_instances_id_seq'::regclass);

ALTER TABLE ONLY public.api_tokens
    ADD CONSTRAINT api_tokens_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.calendar_booking_refs
    ADD CONSTRAINT calendar_booking_refs_pkey PRIMARY KEY (ref, booking);

ALTER TABLE ONLY public.calendar_bookings
    ADD CONSTRAINT calendar_bookings_pkey PRIMARY KEY (booking);

ALTER TABLE ONLY public.calendar_resource_links
    ADD CONSTRAINT calendar_resource_links_pkey PRIMARY KEY (resource);

ALTER TABLE ONLY public.calendar_resources
    ADD CONSTRAINT calendar_resources_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.calendar_resources
    ADD CONSTRAINT calendar_resources_resource_key UNIQUE (resource);

ALTER TABLE ONLY public.calendar_slots
    ADD CONSTRAINT calendar_slots_no_double_booking_0 EXCLUDE USING gist (resource_id WITH =, during WITH &&, hashtextextended(meeting, (0)::bigint) WITH <>) WHERE ((holder AND guarded AND ((resource_id % 8) = 0)));

ALTER TABLE ONLY public.calendar_slots
    ADD CONSTRAINT calendar_slots_no_double_booking_1 EXCLUDE USING gist (resource_id WITH =, during WITH &&, hashtextextended(meeting, (0)::bigint) WITH <>) WHERE ((holder AND guarded AND ((resource_id % 8) = 1)));

ALTER TABLE ONLY public.calendar_slots
    ADD CONSTRAINT calendar_slots_no_double_booking_2 EXCLUDE USING gist (resource_id WITH =, during WITH &&, hashtextextended(meeting, (0)::bigint) WITH <>) WHERE ((holder AND guarded AND ((resource_id % 8) = 2)));

ALTER TABLE ONLY public.calendar_slots
    ADD CONSTRAINT calendar_slots_no_double_booking_3 EXCLUDE USING gist (resource_id WITH =, during WITH &&, hashtextextended(meeting, (0)::bigint) WITH <>) WHERE ((holder AND guarded AND ((resource_id % 8) = 3)));

ALTER TABLE ONLY public.calendar_slots
    ADD CONSTRAINT calendar_slots_no_double_booking_4 EXCLUDE USING gist (resource_id WITH =, during WITH &&, hashtextextended(meeting, (0)::bigint) WITH <>) WHERE ((holder AND guarded AND ((resource_id % 8) = 4)));

ALTER TABLE ONLY public.calendar_slots
    ADD CONSTRAINT calendar_slots_no_double_booking_5 EXCLUDE USING gist (resource_id WITH =, during WITH &&, hashtextextended(meeting, (0)::bigint) WITH <>) WHERE ((holder AND guarded AND ((resource_id % 8) = 5)));

ALTER TABLE ONLY public.calendar_slots
    ADD CONSTRAINT calendar_slots_no_double_booking_6 EXCLUDE USING gist (resource_id WITH =, during WITH &&, hashtextextended(meeting, (0)::bigint) WITH <>) WHERE ((holder AND guarded AND ((resource_id % 8) = 6)));

ALTER TABLE ONLY public.calendar_slots
    ADD CONSTRAINT calendar_slots_no_double_booking_7 EXCLUDE USING gist (resource_id WITH =, during WITH &&, hashtextextended(meeting, (0)::bigint) WITH <>) WHERE ((holder AND guarded AND ((resource_id % 8) = 7)));

ALTER TABLE ONLY public.calendar_slots
    ADD CONSTRAINT calendar_slots_pkey PRIMARY KEY (booking, resource_id);

ALTER TABLE ONLY public.contacts
    ADD CONSTRAINT contacts_pkey PRIMARY KEY (booking);

ALTER TABLE ONLY public.erased_subjects
    ADD CONSTRAINT erased_subjects_pkey PRIMARY KEY (subject);

ALTER TABLE ONLY public.erasures
    ADD CONSTRAINT erasures_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.events
    ADD CONSTRAINT events_event_id_key UNIQUE (event_id);

ALTER TABLE ONLY public.events
    ADD CONSTRAINT events_stream_version_key PRIMARY KEY (stream_id, version);

ALTER TABLE ONLY public.free_texts
    ADD CONSTRAINT free_texts_pkey PRIMARY KEY (event, field);

ALTER TABLE ONLY public.job_instances
    ADD CONSTRAINT job_instances_client_id_key UNIQUE (client_id);

ALTER TABLE ONLY public.job_instances
    ADD CONSTRAINT job_instances_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.payment_stream_refs
    ADD CONSTRAINT payment_stream_refs_pkey PRIMARY KEY (ref, stream);

ALTER TABLE ONLY public.payment_streams
    ADD CONSTRAINT payment_streams_pkey PRIMARY KEY (stream);

ALTER TABLE ONLY public.process_steps
    ADD CONSTRAINT process_steps_key_key UNIQUE (key);

ALTER TABLE ONLY public.process_steps
    ADD CONSTRAINT process_steps_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.projection_checkpoints
    ADD CONSTRAINT projection_checkpoints_pkey PRIMARY KEY (name);

ALTER TABLE ONLY public.provider_alerts
    ADD CONSTRAINT provider_alerts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.provider_secrets
    ADD CONSTRAINT provider_secrets_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.provider_subscriptions
    ADD CONSTRAINT provider_subscriptions_pkey PRIMARY KEY (provider, id);

ALTER TABLE ONLY public.provider_sync_state
    ADD CONSTRAINT provider_sync_state_pkey PRIMARY KEY (provider);

ALTER TABLE ONLY public.receipt_bodies
    ADD CONSTRAINT receipt_bodies_pkey PRIMARY KEY (digest);

ALTER TABLE ONLY public.receipts
    ADD CONSTRAINT receipts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.reconciliation_items
    ADD CONSTRAINT reconciliation_items_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.relay_alerts
    ADD CONSTRAINT relay_alerts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.relay_attempts
    ADD CONSTRAINT relay_attempts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.relay_deliveries
    ADD CONSTRAINT relay_deliveries_endpoint_id_event_id_key UNIQUE (endpoint_id, event_id);

ALTER TABLE ONLY public.relay_deliveries
    ADD CONSTRAINT relay_deliveries_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.relay_endpoint_rules
    ADD CONSTRAINT relay_endpoint_rules_pkey PRIMARY KEY (endpoint_id, since);

ALTER TABLE ONLY public.relay_endpoints
    ADD CONSTRAINT relay_endpoints_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.relay_operational_sends
    ADD CONSTRAINT relay_operational_sends_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.relay_operational_sends
    ADD CONSTRAINT relay_operational_sends_webhook_id_target_endpoint_key UNIQUE (webhook_id, target_endpoint);

ALTER TABLE ONLY public.relay_replays
    ADD CONSTRAINT relay_replays_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.schema_migrations
    ADD CONSTRAINT schema_migrations_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.seat_contacts
    ADD CONSTRAINT seat_contacts_pkey PRIMARY KEY (booking, seat);

ALTER TABLE ONLY public.streams
    ADD CONSTRAINT streams_pkey PRIMARY KEY (stream_id);

ALTER TABLE ONLY public.subject_keys
    ADD CONSTRAINT subject_keys_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.ui_sessions
    ADD CONSTRAINT ui_sessions_pkey PRIMARY KEY (cookie_sha256);

CREATE UNIQUE INDEX api_tokens_active_name_idx ON public.api_tokens USING btree (name) WHERE (revoked_at IS NULL);

CREATE INDEX calendar_booking_refs_booking_idx ON public.calendar_booking_refs USING btree (booking);

CREATE INDEX calendar_bookings_long_idx ON public.calendar_bookings USING gist (during) WHERE ((upper(during) - lower(during)) > '7 days'::interval);

CREATE INDEX calendar_bookings_rescheduled_from_idx ON public.calendar_bookings USING btree (rescheduled_from) WHERE (rescheduled_from <> ''::text);

CREATE INDEX calendar_bookings_series_idx ON public.calendar_bookings USING btree (series) WHERE (series <> ''::text);

CREATE INDEX calendar_bookings_start_idx ON public.calendar_bookings USING btree (lower(during));

CREATE INDEX calendar_resource_links_name_idx ON public.calendar_resource_links USING btree (name);

CREATE INDEX calendar_slots_guarded_end_idx ON public.calendar_slots USING btree (upper(during)) WHERE guarded;

CREATE INDEX calendar_slots_long_idx ON public.calendar_slots USING gist (resource_id, during) WHERE ((upper(during) - lower(during)) > '7 days'::interval);

CREATE INDEX calendar_slots_start_idx ON public.calendar_slots USING btree (resource_id, lower(during), upper(during));

CREATE INDEX events_tx_position_idx ON public.events USING btree (tx_id, global_position);

CREATE INDEX free_texts_booking_idx ON public.free_texts USING btree (booking);

CREATE INDEX payment_stream_refs_stream_idx ON public.payment_stream_refs USING btree (stream);

CREATE INDEX process_steps_booking_idx ON public.process_steps USING btree (booking);

CREATE INDEX process_steps_failed_idx ON public.process_steps USING btree (id) WHERE (state = 'failed'::text);

CREATE INDEX process_steps_open_idx ON public.process_steps USING btree (state, updated_at) WHERE (state = ANY (ARRAY['pending'::text, 'requested'::text, 'needs_reconciliation'::text]));

CREATE INDEX process_steps_thread_idx ON public.process_steps USING btree (thread);

CREATE INDEX provider_secrets_provider_idx ON public.provider_secrets USING btree (provider, id DESC);

CREATE INDEX receipt_bodies_stored_at_idx ON public.receipt_bodies USING btree (stored_at) WHERE ((key_id IS NOT NULL) OR (subject IS NULL));

CREATE INDEX receipt_bodies_subject_idx ON public.receipt_bodies USING btree (subject);

CREATE INDEX receipts_bookings_idx ON public.receipts USING gin (bookings) WITH (fastupdate=off);

CREATE INDEX receipts_delivery_id_idx ON public.receipts USING btree (delivery_id);

CREATE INDEX receipts_duplicate_fold_idx ON public.receipts USING btree (provider, delivery_id, body_digest, id) WHERE (outcome = 'duplicate'::text);

CREATE INDEX receipts_pending_booking_idx ON public.receipts USING btree (pending_booking) WHERE (pending_booking <> ''::text);

CREATE INDEX receipts_quarantined_idx ON public.receipts USING btree (id) WHERE (outcome = 'quarantined'::text);

CREATE INDEX reconciliation_items_booking_idx ON public.reconciliation_items USING btree (booking);

CREATE UNIQUE INDEX reconciliation_items_one_open_idx ON public.reconciliation_items USING btree (kind, subject) WHERE (closed_at IS NULL);

CREATE INDEX reconciliation_items_open_idx ON public.reconciliation_items USING btree (opened_at) WHERE (closed_at IS NULL);

CREATE INDEX reconciliation_items_other_booking_idx ON public.reconciliation_items USING btree (other_booking) WHERE (other_booking <> ''::text);

CREATE INDEX reconciliation_items_receipt_idx ON public.reconciliation_items USING btree (kind, receipt_id) WHERE (receipt_id IS NOT NULL);

CREATE INDEX relay_alerts_endpoint ON public.relay_alerts USING btree (endpoint_id, id);

CREATE INDEX relay_attempts_delivery ON public.relay_attempts USING btree (delivery_id, attempt);

CREATE INDEX relay_deliveries_booking ON public.relay_deliveries USING btree (booking);

CREATE INDEX relay_deliveries_held ON public.relay_deliveries USING btree (endpoint_id, held, stream, stream_version) WHERE (held IS NOT NULL);

CREATE INDEX relay_deliveries_replay ON public.relay_deliveries USING btree (replay_id) WHERE (replay_id IS NOT NULL);

CREATE INDEX relay_deliveries_state ON public.relay_deliveries USING btree (state, endpoint_id);

CREATE INDEX relay_deliveries_stream_order ON public.relay_deliveries USING btree (endpoint_id, stream, stream_version) WHERE (state = ANY (ARRAY['pending'::text, 'paused'::text]));

CREATE INDEX relay_deliveries_window ON public.relay_deliveries USING btree (endpoint_id, recorded_at);

CREATE INDEX relay_operational_sends_about ON public.relay_operational_sends USING btree (about_endpoint, id);

CREATE INDEX subject_keys_kek_idx ON public.subject_keys USING btree (kek_id);

CREATE INDEX subject_keys_subject_idx ON public.subject_keys USING btree (subject);

CREATE INDEX ui_sessions_expires_at_idx ON public.ui_sessions USING btree (expires_at);

CREATE TRIGGER process_steps_finished_delete AFTER DELETE ON public.process_steps FOR EACH ROW WHEN ((old.state = ANY (ARRAY['done'::text, 'failed'::text, 'skipped'::text]))) EXECUTE FUNCTION public.bl_count_step_finishes();

CREATE TRIGGER process_steps_finished_insert AFTER INSERT ON public.process_steps FOR EACH ROW WHEN ((new.state = ANY (ARRAY['done'::text, 'failed'::text, 'skipped'::text]))) EXECUTE FUNCTION public.bl_count_step_finishes();

CREATE TRIGGER process_steps_finished_truncate AFTER TRUNCATE ON public.process_steps FOR EACH STATEMENT EXECUTE FUNCTION public.bl_step_finishes_truncated();

CREATE TRIGGER process_steps_finished_update AFTER UPDATE OF kind, state ON public.process_steps FOR EACH ROW WHEN ((((old.kind IS DISTINCT FROM new.kind) OR (old.state IS DISTINCT FROM new.state)) AND ((old.state = ANY (ARRAY['done'::text, 'failed'::text, 'skipped'::text])) OR (new.state = ANY (ARRAY['done'::text, 'failed'::text, 'skipped'::text]))))) EXECUTE FUNCTION public.bl_count_step_finishes();

ALTER TABLE ONLY public.erased_subjects
    ADD CONSTRAINT erased_subjects_erasure_fkey FOREIGN KEY (erasure) REFERENCES public.erasures(id);

ALTER TABLE ONLY public.relay_alerts
    ADD CONSTRAINT relay_alerts_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES public.relay_endpoints(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.relay_attempts
    ADD CONSTRAINT relay_attempts_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES public.relay_deliveries(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.relay_deliveries
    ADD CONSTRAINT relay_deliveries_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES public.relay_endpoints(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.relay_deliveries
    ADD CONSTRAINT relay_deliveries_replay_id_fkey FOREIGN KEY (replay_id) REFERENCES public.relay_replays(id) ON DELETE SET NULL;

ALTER TABLE ONLY public.relay_endpoint_rules
    ADD CONSTRAINT relay_endpoint_rules_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES public.relay_endpoints(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.relay_operational_sends
    ADD CONSTRAINT relay_operational_sends_target_endpoint_fkey FOREIGN KEY (target_endpoint) REFERENCES public.relay_endpoints(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.relay_replays
    ADD CONSTRAINT relay_replays_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES public.relay_endpoints(id) ON DELETE CASCADE;

ALTER TABLE ONLY public.ui_sessions
    ADD CONSTRAINT ui_sessions_token_id_fkey FOREIGN KEY (token_id) REFERENCES public.api_tokens(id) ON DELETE CASCADE;
