-- Crypto-shredding of receipt bodies (issue 16, ADR 0015, docs/operations/personal-data.md).
--
-- A verified body holds whatever the provider sent about people: names, addresses, phone numbers,
-- answers. It must stay verbatim (the signed bytes as received), so it is stored encrypted with a data
-- key of its subject — the booking it is about — and erasing the subject deletes its keys and
-- replaces its bodies by a tombstone. Encryption is done by the process (AES-256-GCM, Go's standard
-- library) before the commit; the database never sees a key in the clear. A data key is wrapped by a
-- master key of BOOKINGLEDGER_MASTER_KEY (kek_id names which); `keys rewrap` moves them to the newest.
--
-- receipt_bodies stays one row per SHA-256 digest of the plain body, so duplicate receipts still share
-- one body (and the duplicate folding of 0031 is unchanged); the row now says whose it is (subject)
-- and under which data key (key_id). A subject may have several data keys (each process makes its
-- own and none waits for another to find it); erasure deletes them all.
--
-- Erasure and ingest of the same subject serialize on an advisory lock per subject: ingest takes it
-- shared (bl_subject_erased), erasure exclusive. Once a subject is in erased_subjects, nothing
-- personal of it is stored again: a redelivery's receipt is kept without its body.
-- +goose Up

CREATE TABLE subject_keys (
    id uuid PRIMARY KEY,
    subject text NOT NULL,
    kek_id text NOT NULL,
    wrapped bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX subject_keys_subject_idx ON subject_keys (subject);
CREATE INDEX subject_keys_kek_idx ON subject_keys (kek_id);

ALTER TABLE receipt_bodies ADD COLUMN subject text;
ALTER TABLE receipt_bodies ADD COLUMN key_id uuid;
ALTER TABLE receipt_bodies ADD COLUMN stored_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX receipt_bodies_subject_idx ON receipt_bodies (subject);
CREATE INDEX receipt_bodies_stored_at_idx ON receipt_bodies (stored_at) WHERE key_id IS NOT NULL OR subject IS NULL;

-- Every erasure: the subject.erased fact. No personal data: who asked (a token's name or the CLI
-- user), when, which bookings, and how much went.
CREATE TABLE erasures (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind text NOT NULL DEFAULT 'subject.erased' CHECK (kind IN ('subject.erased', 'retention')),
    erased_at timestamptz NOT NULL DEFAULT now(),
    erased_by text NOT NULL,
    bookings text[] NOT NULL,
    counts jsonb NOT NULL
);

CREATE TABLE erased_subjects (
    subject text PRIMARY KEY,
    erasure bigint NOT NULL REFERENCES erasures (id),
    erased_at timestamptz NOT NULL DEFAULT now()
);

-- bl_subject_erased takes the subject's erasure lock shared, for the rest of the transaction, and
-- then says whether the subject is erased. VOLATILE plpgsql: the check takes its snapshot after the
-- lock, so an erasure that committed while we waited is seen.
-- +goose StatementBegin
CREATE FUNCTION bl_subject_erased(s text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared(hashtextextended('bl-erase:' || s, 0));
    RETURN EXISTS (SELECT 1 FROM erased_subjects e WHERE e.subject = s);
END
$$;
-- +goose StatementEnd

-- receipt_body_put stores a body once per digest and returns the digest for the receipt, or NULL
-- when there is no body or its subject is erased. sealed is the body encrypted under data key key_id
-- (with the key's row: subject, kek_id, wrapped), or the plain body when key_id is NULL (stores
-- without a sealer: tests of other packages).
-- +goose StatementBegin
CREATE FUNCTION receipt_body_put(sealed bytea, d bytea, key_id uuid, subj text, kek text, wrapped bytea) RETURNS bytea
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
    -- A body stored in plain text before this migration is sealed when it comes again.
    INSERT INTO receipt_bodies (digest, body, subject, key_id) VALUES (d, sealed, subj, key_id)
    ON CONFLICT (digest) DO UPDATE SET body = EXCLUDED.body, subject = EXCLUDED.subject, key_id = EXCLUDED.key_id
    WHERE receipt_bodies.key_id IS NULL AND receipt_bodies.subject IS NULL AND EXCLUDED.key_id IS NOT NULL;
    RETURN d;
END
$$;
-- +goose StatementEnd
