-- The double-booking guard covers the claims that can still clash (issue #33, docs/adr/0022-the-guard-
-- covers-what-can-still-clash.md).
--
-- guarded says a claim is in the guard. The live projection inserts every claim guarded (the
-- default); a rebuild loads the claims whose slot ended before its horizon (the database's now()
-- minus readmodel.GuardMargin, one day) unguarded, and the live system's guard sweep unguards, a
-- bounded batch at a time, the claims whose slot has ended since. A partial index's predicate must be
-- immutable, so the horizon cannot be in it; the stored flag is. An ended slot overlaps only slots that
-- started before it ended, so no slot starting after the horizon — nothing still bookable — can clash
-- with an unguarded claim: the guard loses no protection for anything bookable, and the Go slot-holder
-- rule still decides every conflict, past ones included.
--
-- calendar_slots_guarded_end_idx finds the sweep's next claims (guarded, ended first); it covers only
-- the guarded claims, so a rebuild of a calendar mostly in the past builds it small, like the guard.
-- +goose Up
ALTER TABLE calendar_slots ADD COLUMN guarded boolean NOT NULL DEFAULT true;

-- +goose StatementBegin
DO $$
BEGIN
    FOR part IN 0 .. 7 LOOP
        EXECUTE format('ALTER TABLE calendar_slots DROP CONSTRAINT %I', 'calendar_slots_no_double_booking_' || part);
        EXECUTE format('ALTER TABLE calendar_slots ADD CONSTRAINT %I
    EXCLUDE USING gist (resource_id WITH =, during WITH &&, (hashtextextended(meeting, 0)) WITH <>)
    WHERE (holder AND guarded AND resource_id %% 8 = %s)', 'calendar_slots_no_double_booking_' || part, part);
    END LOOP;
END
$$;
-- +goose StatementEnd

CREATE INDEX calendar_slots_guarded_end_idx ON calendar_slots (upper(during)) WHERE guarded;
