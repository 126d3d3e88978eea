-- Erasure is marked by a column, not by the first bytes of the body (issue #32). An erased body keeps
-- its tombstone ("\x00ble1" and the time, as before) so that nothing read from an older dump changes,
-- but whether a body is erased, and when, is now erased_at: receipt_bodies.erased_at for the shared
-- bodies, receipts.body_erased_at for the inline bodies of receipts stored before migration 0031.
-- Rows that carry the old tombstone are backfilled with the time it holds.
--
-- The erasure lock key ('bl-erase:' and the subject) is defined once, by bl_erasure_lock_key: ingest
-- takes it shared (bl_subject_erased), erasure and retention exclusive (adapters/privacy).
-- +goose Up

ALTER TABLE receipt_bodies ADD COLUMN erased_at timestamptz;
ALTER TABLE receipts ADD COLUMN body_erased_at timestamptz;

-- The tombstone's time (RFC 3339 after the five bytes of the prefix); the start of the era when it
-- does not read (still erased, as the reader before this migration said).
-- +goose StatementBegin
CREATE FUNCTION pg_temp.bl_tombstone_time(b bytea) RETURNS timestamptz
LANGUAGE plpgsql AS $$
BEGIN
    RETURN convert_from(substring(b FROM 6), 'UTF8')::timestamptz;
EXCEPTION WHEN OTHERS THEN
    RETURN '0001-01-01 00:00:00+00'::timestamptz;
END
$$;
-- +goose StatementEnd

UPDATE receipt_bodies SET erased_at = pg_temp.bl_tombstone_time(body)
WHERE substring(body FOR 5) = '\x00626c6531'::bytea;
UPDATE receipts SET body_erased_at = pg_temp.bl_tombstone_time(body)
WHERE body IS NOT NULL AND substring(body FOR 5) = '\x00626c6531'::bytea;

DROP FUNCTION pg_temp.bl_tombstone_time(bytea);

-- receipt_body_erased_at is when a receipt's body was erased (NULL when it was not): the inline
-- body's mark for a receipt stored before 0031, else the shared body's. The companion of
-- receipt_body (migration 0031).
CREATE FUNCTION receipt_body_erased_at(inline bytea, inline_erased_at timestamptz, digest bytea) RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN inline IS NOT NULL THEN inline_erased_at
        ELSE (SELECT b.erased_at FROM receipt_bodies b WHERE b.digest = receipt_body_erased_at.digest) END
$$;

-- bl_erasure_lock_key is the advisory lock of a subject's erasure.
CREATE FUNCTION bl_erasure_lock_key(subject text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT hashtextextended('bl-erase:' || subject, 0)
$$;

-- The same bl_subject_erased as 0131, with the key from bl_erasure_lock_key.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION bl_subject_erased(s text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(bl_erasure_lock_key(s));
    RETURN EXISTS (SELECT 1 FROM erased_subjects e WHERE e.subject = s);
END
$$;
-- +goose StatementEnd

-- The same receipt_body_put as 0210, with a tombstone known by its erased_at.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION receipt_body_put(sealed bytea, d bytea, key_id uuid, subj text, kek text, wrapped bytea) RETURNS bytea
LANGUAGE plpgsql AS $$
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
-- +goose StatementEnd
