-- Personal data (issue 16, ADR 0015): free text a person typed — a cancel's or a rejection's reason —
-- never enters the immutable events any more. The ledger splits it off each event
-- (booking.SplitFreeText) and keeps it here, one row per event and field, where erasing a person can
-- remove it; history puts it back in place for the auditor. Erasure empties text and sets erased_at,
-- so history says when ("[erased on …]") and a redelivery of the same event finds the row and cannot
-- bring the text back.
--
-- Events recorded before this migration may still carry a reason in their payload: events are never
-- rewritten (docs/operations/personal-data.md says what that means for erasure).
-- +goose Up

CREATE TABLE free_texts (
    event uuid NOT NULL,
    field text NOT NULL CHECK (field IN ('cancel_reason', 'reject_reason')),
    booking text NOT NULL,
    text text NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    erased_at timestamptz,
    PRIMARY KEY (event, field),
    CONSTRAINT free_texts_erased_is_empty CHECK (erased_at IS NULL OR text = '')
);

CREATE INDEX free_texts_booking_idx ON free_texts (booking);
