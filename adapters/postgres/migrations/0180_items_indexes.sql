-- reconciliation_items_subject_idx (kind, subject) serves no lookup by subject: those are of open
-- items (ON CONFLICT (kind, subject) WHERE closed_at IS NULL), which the unique partial
-- reconciliation_items_one_open_idx answers. Its one other use was the quarantined receipts without
-- an item (kind = 'quarantined' AND receipt_id = r.id), which the index of receipt ids now answers
-- with the kind in front. Every item opened kept the full index up to date all the same: a rebuild's
-- 240,000 opens on a 250,000-event log paid about a tenth of their insert for it (docs/benchmarks.md,
-- "Rebuild at scale"). The new index holds only quarantined items (the only ones with a receipt).
-- +goose Up
DROP INDEX IF EXISTS reconciliation_items_subject_idx;
DROP INDEX IF EXISTS reconciliation_items_receipt_idx;
CREATE INDEX reconciliation_items_receipt_idx ON reconciliation_items (kind, receipt_id) WHERE receipt_id IS NOT NULL;
