-- The double-booking guard in eight parts (issue #10, docs/benchmarks.md "The guard's GiST on a log
-- without conflicts", docs/adr/0008-rebuild-loads-staging-tables-and-swaps.md).
--
-- Two holders can only clash on one resource: the guard compares resource_id with =. So eight
-- exclusion constraints, each over the holders whose resource_id % 8 is its own, refuse exactly what
-- the one constraint refused. PostgreSQL 15 builds a GiST by inserting entry after entry, and both
-- the build and the check of every entry cost more per entry as the tree grows: a rebuild of a log
-- without conflicts, where every claim is a holder, spent 47 s of 71 on the one guard at 1,000,000
-- claims. Each part is an eighth of the tree; their index phases measured 9–34 % shorter at
-- 1,000,000 claims and about 17 % at 250,000 (alternated pairs), for eight scans of the table instead
-- of one. A live insert checks one part, in a smaller tree.
--
-- The rebuild copies every constraint of calendar_slots onto its staging table, so it builds the
-- parts as it built the one. The parts are named calendar_slots_no_double_booking_0 … _7.
-- +goose Up
ALTER TABLE calendar_slots DROP CONSTRAINT calendar_slots_no_double_booking;

-- +goose StatementBegin
DO $$
BEGIN
    FOR part IN 0 .. 7 LOOP
        EXECUTE format('ALTER TABLE calendar_slots ADD CONSTRAINT %I
    EXCLUDE USING gist (resource_id WITH =, during WITH &&, (hashtextextended(meeting, 0)) WITH <>)
    WHERE (holder AND resource_id %% 8 = %s)', 'calendar_slots_no_double_booking_' || part, part);
    END LOOP;
END
$$;
-- +goose StatementEnd
