-- Group commit (docs/adr/0012-group-commit.md): deliveries that reach the store together commit in one
-- transaction. bl_try_appends is one delivery's appends inside a subtransaction: an error undoes that
-- delivery's appends only and is returned instead of raised, so one bad delivery never aborts the
-- others of its group.
-- +goose Up

-- bl_appends runs bl_append once per stream of one delivery, raising its errors. The appends are given
-- as parallel arrays: p_streams, p_kinds, p_versions and p_counts per append, the events of all
-- appends concatenated in p_ids, p_types, p_data and p_metadata (p_counts[k] of them for append k).
-- A delivery committed alone calls it directly: an error fails that transaction only.
-- +goose StatementBegin
CREATE FUNCTION bl_appends(
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
    first_versions := '{}';
    last_versions := '{}';
    tx_ids := '{}';
    positions := '{}';
    duplicates := '{}';
    FOR k IN 1 .. n LOOP
        SELECT * INTO r FROM bl_append(p_streams[k], p_kinds[k], p_versions[k],
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

-- bl_try_appends is bl_appends inside a subtransaction, for a delivery committed in a group: an error
-- undoes that delivery's appends only and comes back as status (its SQLSTATE: bl_append's
-- BL001–BL003, a deadlock, …), message and detail, with NULL results.
-- +goose StatementBegin
CREATE FUNCTION bl_try_appends(
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
BEGIN
    SELECT * INTO status, message, detail, first_versions, last_versions, tx_ids, positions, duplicates
    FROM bl_appends(p_streams, p_kinds, p_versions, p_counts, p_ids, p_types, p_data, p_metadata);
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
