-- What attendee list a host-calendar step writes (issue #35): a digest of the seated booking's seat
-- keys (projections/steps.AttendeeDigest). An attendee update is planned with the state it answers;
-- every calendar step records, when it is claimed, the state it writes, so that the planner plans an
-- update only when the seats differ from what the last effected step wrote. '' for a booking that is
-- not seated, and for steps claimed before this column (a seated booking's next re-plan writes its
-- list once). An erasure sets it to '' on the step whose object listed an erased attendee, so that
-- the object is rewritten.
-- +goose Up
ALTER TABLE process_steps ADD COLUMN attendees text NOT NULL DEFAULT '';
