-- A body that retention shredded stays shredded when it comes again, also when it was stored in plain
-- text before sealing began (migration 0131). Retention's tombstone of such a body keeps its row's
-- empty subject and key, so 0131's receipt_body_put took it for a plain body to seal in place and
-- wrote the body back over it: the retried delivery's body, and every earlier receipt's, readable
-- again. A sealed body's tombstone keeps its subject and was never overwritten; now neither is. The
-- same receipt_body_put as 0131 otherwise.
-- +goose Up

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
    -- A body stored in plain text before 0131 is sealed when it comes again, unless it is a tombstone
    -- (ErasedPrefix, adapters/postgres/bodies.go: "\x00ble1").
    INSERT INTO receipt_bodies (digest, body, subject, key_id) VALUES (d, sealed, subj, key_id)
    ON CONFLICT (digest) DO UPDATE SET body = EXCLUDED.body, subject = EXCLUDED.subject, key_id = EXCLUDED.key_id
    WHERE receipt_bodies.key_id IS NULL AND receipt_bodies.subject IS NULL AND EXCLUDED.key_id IS NOT NULL
        AND substring(receipt_bodies.body FOR 5) <> '\x00626c6531'::bytea;
    RETURN d;
END
$$;
-- +goose StatementEnd
