-- The receipt row's indexes, checked against every query that reads receipts (issue #12,
-- docs/benchmarks.md "The receipt's indexes and the ack tail").
--
-- - receipts_bookings_idx (GIN, auditors' and erasure's bookings @> / &&) stops using its pending
--   list. With fastupdate on, an insert appends to the list and the insert that finds it over
--   gin_pending_list_limit (4 MB: about 70,000 receipts) merges all of it into the tree inside that
--   delivery's statement — 0.7 s for one insert, measured, while its group and the deliveries queued
--   behind it wait — unless autovacuum got there first, which on a large table it does not (its
--   insert threshold grows with the table). Inserted directly, each receipt costs about 10 µs more of
--   CPU than the list did, work the list only postponed.
-- - receipts_outcome_received_at_idx took an entry for every receipt to serve reads of quarantined
--   ones only (the metrics gauge, the quarantine's reconciliation items): a partial index of those
--   serves them, and an accepted or duplicate receipt no longer inserts into it.
-- +goose Up
ALTER INDEX receipts_bookings_idx SET (fastupdate = off);
-- Turning it off leaves what is already pending where it is: merged now, not by some delivery.
SELECT gin_clean_pending_list('receipts_bookings_idx');

CREATE INDEX receipts_quarantined_idx ON receipts (id) WHERE outcome = 'quarantined';
DROP INDEX receipts_outcome_received_at_idx;

