-- The claims' indexes without GiST over text and without a GiST over every claim (issue #10,
-- docs/adr/0008-rebuild-loads-staging-tables-and-swaps.md). PostgreSQL 15 builds a btree_gist index
-- only by inserting every row, so a rebuild's GiST over 250,000 claims cost 7–14 s, about what keeping
-- it up to date row by row costs; and the meeting's text in the exclusion constraint made the claims'
-- insert the costliest statement of a live batch.
--
-- - The double-booking guard compares meetings by a 64-bit hash of their text (hashtextextended, the
--   hash PostgreSQL keeps stable for hash partitioning). Two different meetings whose hashes collide
--   (about 2^-64 for a pair) would not be refused by the database if they overlapped as holders on one
--   resource; the slot-holder rule in Go compares the text and never makes them both holders, so only
--   the guard against a bug in that rule is that much weaker.
-- - A claim overlapping a range on a resource starts at most seven days before it — found through a
--   btree on (resource_id, start, end), a sorted build — or is longer than seven days, found through
--   the small partial GiST; bl_overlapping_claims asks both, as calendar_bookings is asked
--   (readmodel.Calendar).
-- +goose Up
ALTER TABLE calendar_slots DROP CONSTRAINT calendar_slots_no_double_booking;
DROP INDEX calendar_slots_overlap_idx;
ALTER TABLE calendar_slots ADD CONSTRAINT calendar_slots_no_double_booking
    EXCLUDE USING gist (resource_id WITH =, during WITH &&, (hashtextextended(meeting, 0)) WITH <>) WHERE (holder);
CREATE INDEX calendar_slots_start_idx ON calendar_slots (resource_id, lower(during), upper(during));
CREATE INDEX calendar_slots_long_idx ON calendar_slots USING gist (resource_id, during)
    WHERE upper(during) - lower(during) > interval '7 days';

-- The bookings whose claims on p_resource overlap p_during, each once. An SQL function the planner inlines into
-- the query that calls it, so each branch plans on its own index; the predicate of the partial GiST
-- is repeated literally so that a generic plan can use it. Its body names calendar_slots by text and
-- it returns text, not the table's row type: nothing ties it to the table a rebuild swaps in.
-- +goose StatementBegin
CREATE FUNCTION bl_overlapping_claims(p_resource integer, p_during tstzrange) RETURNS SETOF text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
SELECT booking FROM calendar_slots
WHERE resource_id = p_resource AND lower(during) >= lower(p_during) - interval '7 days'
    AND lower(during) < upper(p_during) AND upper(during) > lower(p_during) AND during && p_during
UNION ALL
SELECT booking FROM calendar_slots
WHERE resource_id = p_resource AND during && p_during AND upper(during) - lower(during) > interval '7 days'
    AND lower(during) < lower(p_during) - interval '7 days'
$$;
-- +goose StatementEnd
