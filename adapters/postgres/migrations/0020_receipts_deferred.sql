-- A verified delivery whose events need data that could not be fetched yet (Acuity webhooks carry only
-- an appointment id) is kept as a 'deferred' receipt, committed together with the background job
-- (River, docs/adr/0006-river-for-deferred-work.md) that fetches it later. The job's own receipt, which
-- names the deferred one in its reason, carries the final outcome.
--
-- The new check is a strict superset of the one it replaces (0002_receipts.sql), so every stored row
-- passes it; validating it still reads the table once under this migration's lock, which is cheap at the
-- sizes this project has run at. On a very large table split it: ADD ... NOT VALID here, then
-- VALIDATE CONSTRAINT in a later migration (it takes only a SHARE UPDATE EXCLUSIVE lock).
-- +goose Up

ALTER TABLE receipts DROP CONSTRAINT receipts_outcome_check;
ALTER TABLE receipts ADD CONSTRAINT receipts_outcome_check
    CHECK (outcome IN ('accepted', 'duplicate', 'ignored', 'quarantined', 'rejected', 'deferred'));
