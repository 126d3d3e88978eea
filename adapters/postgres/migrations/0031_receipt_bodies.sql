-- Replay amplification (issue 11): Cal.com and Acuity sign no timestamp, so a captured signed body
-- verifies forever, and every replay used to store another receipt with the whole body.
--
-- 1. A verified body is stored once per SHA-256 digest in receipt_bodies; a receipt references it
--    (body_digest) instead of carrying a copy. Receipts stored before keep their inline body, so
--    receipt_body(body, body_digest) reads either. Writing goes through receipt_body_ref and reading
--    through receipt_body: the one place that changes when bodies are encrypted per subject.
-- 2. Identical duplicate deliveries past a rate fold into a count on one receipt: repeats (how many
--    deliveries it stands for) and last_received_at (when the last came; received_at is the first).
--    Store.Commit decides it; the partial index finds the receipt to fold into.
--
-- Bodies are never deleted here: a digest may be shared by receipts of any age.
-- +goose Up

CREATE TABLE receipt_bodies (
    digest bytea PRIMARY KEY,
    body bytea NOT NULL,
    CONSTRAINT receipt_bodies_digest_is_sha256 CHECK (octet_length(digest) = 32)
);

ALTER TABLE receipts ADD COLUMN body_digest bytea;
ALTER TABLE receipts ADD COLUMN repeats integer NOT NULL DEFAULT 1;
ALTER TABLE receipts ADD COLUMN last_received_at timestamptz;
ALTER TABLE receipts ADD CONSTRAINT receipts_rejected_without_body_digest CHECK (outcome <> 'rejected' OR body_digest IS NULL);
ALTER TABLE receipts ADD CONSTRAINT receipts_repeats_positive CHECK (repeats >= 1);
CREATE INDEX receipts_duplicate_fold_idx ON receipts (provider, delivery_id, body_digest, id) WHERE outcome = 'duplicate';

-- receipt_body_ref stores b once and returns its digest (NULL for NULL).
-- +goose StatementBegin
CREATE FUNCTION receipt_body_ref(b bytea) RETURNS bytea
LANGUAGE plpgsql AS $$
DECLARE
    d bytea;
BEGIN
    IF b IS NULL THEN
        RETURN NULL;
    END IF;
    d := sha256(b);
    INSERT INTO receipt_bodies (digest, body) VALUES (d, b) ON CONFLICT (digest) DO NOTHING;
    RETURN d;
END
$$;
-- +goose StatementEnd

-- receipt_body is a receipt's body: the inline copy of a receipt stored before 0031, else the shared one.
CREATE FUNCTION receipt_body(inline bytea, digest bytea) RETURNS bytea
LANGUAGE sql STABLE AS $$
    SELECT coalesce(inline, (SELECT b.body FROM receipt_bodies b WHERE b.digest = receipt_body.digest))
$$;
