-- Event store: streams with their versions, events in a gap-free global order, and bl_append, which
-- appends to one stream in a single statement (one round trip from the application).
-- See docs/adr/0002-global-order-on-postgres.md for why events are read by (tx_id, global_position).
-- +goose Up

-- Projections (later migrations) need exclusion constraints over ranges mixed with equality.
CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE streams (
    stream_id text PRIMARY KEY,
    -- Number of events in the stream; the row is also the lock that serializes writers of the stream.
    version bigint NOT NULL CHECK (version >= 0)
) WITH (fillfactor = 70); -- every append updates its row: room on the page keeps those updates HOT

CREATE TABLE events (
    -- Allocation order. Not commit order: see the ADR. Readers order by (tx_id, global_position).
    global_position bigint GENERATED ALWAYS AS IDENTITY,
    -- The writing transaction: rows of transactions older than every running one are final.
    tx_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
    -- No foreign key to streams: bl_append, the only writer, creates the stream row first, and the
    -- check would cost a query and a row lock per event.
    stream_id text NOT NULL,
    version bigint NOT NULL CHECK (version > 0),
    event_id uuid NOT NULL,
    event_type text NOT NULL CHECK (event_type <> ''),
    -- Opaque bytes: NULL (a nil slice) and '' (an empty one) are kept apart so that they round-trip.
    data bytea,
    metadata bytea,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT events_stream_version_key PRIMARY KEY (stream_id, version),
    -- Event IDs are unique across streams: this is the ledger's dedupe key.
    CONSTRAINT events_event_id_key UNIQUE (event_id)
);

CREATE INDEX events_tx_position_idx ON events (tx_id, global_position);

-- bl_append appends p_ids/p_types/p_data/p_metadata (parallel arrays) to p_stream.
--
-- p_expected_kind is 'any', 'no_stream', 'stream_exists' or 'exact' (then p_expected_version applies).
-- Re-appending event IDs that are all stored in this stream, in this order, at consecutive versions is
-- an idempotent success (duplicate = true, the original versions), whatever the expectation says.
--
-- Errors, with SQLSTATEs the Go adapter translates:
--   BL001  the stream's version does not satisfy the expectation (DETAIL = the actual version)
--   BL002  some event IDs are stored already, or stored in another stream or order
--   BL003  the arguments are malformed
-- +goose StatementBegin
CREATE FUNCTION bl_append(
    p_stream text,
    p_expected_kind text,
    p_expected_version bigint,
    p_ids uuid[],
    p_types text[],
    p_data bytea[],
    p_metadata bytea[],
    OUT first_version bigint,
    OUT last_version bigint,
    OUT tx_id xid8,
    OUT global_position bigint,
    OUT duplicate boolean)
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
-- +goose StatementEnd
