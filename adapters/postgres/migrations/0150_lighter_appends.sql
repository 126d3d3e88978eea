-- Less PostgreSQL CPU per delivery (issue #12): the same bl_appends and bl_try_appends as migration
-- 0090, the same answers and errors, with less PL/pgSQL machinery around bl_append.
--
-- - Each call is an assignment (r := f(...)), which PL/pgSQL evaluates as a simple expression, where
--   `SELECT * INTO r FROM f(...)` ran a query through the executor every time.
-- - A delivery of one stream (nearly every delivery) passes its arrays to bl_append as they came,
--   instead of slicing and concatenating them.
--
-- Measured inside the server (DO loops of 500 new-stream appends, interleaved, four rounds, on a
-- shared machine under load): bl_try_appends 1,498–1,720 → 1,193–1,206 µs per delivery, bl_appends
-- 1,049–1,157 → 854–937 µs (docs/benchmarks.md).
-- +goose Up

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION bl_appends(
    p_streams text[],
    p_kinds text[],
    p_versions bigint[],
    p_counts int[],
    p_ids uuid[],
    p_types text[],
    p_data bytea[],
    p_metadata bytea[],
    OUT status text,
    OUT message text,
    OUT detail text,
    OUT first_versions bigint[],
    OUT last_versions bigint[],
    OUT tx_ids xid8[],
    OUT positions bigint[],
    OUT duplicates boolean[])
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
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION bl_try_appends(
    p_streams text[],
    p_kinds text[],
    p_versions bigint[],
    p_counts int[],
    p_ids uuid[],
    p_types text[],
    p_data bytea[],
    p_metadata bytea[],
    OUT status text,
    OUT message text,
    OUT detail text,
    OUT first_versions bigint[],
    OUT last_versions bigint[],
    OUT tx_ids xid8[],
    OUT positions bigint[],
    OUT duplicates boolean[])
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
-- +goose StatementEnd
