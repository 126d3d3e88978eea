package stepstore

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"bookingledger/adapters/process"
	"bookingledger/projections/steps"
)

// planErasedAttendees is the host calendars' part of an erasure, in its transaction: every thread of
// the subjects whose event lists attendees (steps.ListsAttendees) gets an update that writes the
// event again, without the erased attendees (their contacts are gone by the time it runs), and its
// job. The step its update follows no longer stands for what the event should say: its recorded state
// is cleared, so that the planner agrees the update is needed (and plans the same key). It returns
// how many updates it planned.
func planErasedAttendees(ctx context.Context, tx pgx.Tx, subjects []string) (int, error) {
	stored, err := stepsOf(ctx, tx, `WHERE thread IN (SELECT thread FROM process_steps WHERE booking = ANY($1)) ORDER BY id FOR UPDATE`, subjects)
	if err != nil {
		return 0, err
	}
	byThread := map[string][]steps.Step{}
	var threads []string
	for _, s := range plannerSteps(stored) {
		if _, ok := byThread[s.Thread]; !ok {
			threads = append(threads, s.Thread)
		}
		byThread[s.Thread] = append(byThread[s.Thread], s)
	}
	var plan steps.Plan
	var listed []steps.Key
	for _, thread := range threads {
		last, ok := steps.ListsAttendees(byThread[thread])
		if !ok {
			continue
		}
		u := steps.AttendeeUpdate(thread, last.Booking, last.Attendees, last)
		listed = append(listed, last.Key)
		known := false
		for _, have := range byThread[thread] {
			if have.Key == u.Key {
				known = true
				if have.State == process.StateSkipped && have.Attempts == 0 {
					plan.Revive = append(plan.Revive, u.Key)
				}
			}
		}
		if !known {
			plan.Insert = append(plan.Insert, u)
		}
	}
	if len(listed) == 0 {
		return 0, nil
	}
	batch := &pgx.Batch{}
	for _, k := range listed {
		batch.Queue(`UPDATE process_steps SET attendees = '', updated_at = now() WHERE key = $1`, uuid.UUID(k))
	}
	var jobs []process.StepArgs
	queuePlan(batch, plan, &jobs)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return 0, fmt.Errorf("plan erased attendees' calendar updates: %w", err)
	}
	if len(jobs) == 0 {
		return len(listed), nil
	}
	// Insert-only: River inserts the jobs in the erasure's transaction, no pool needed.
	client, err := river.NewClient(riverpgxv5.New(nil), &river.Config{})
	if err != nil {
		return 0, fmt.Errorf("plan erased attendees' calendar updates: %w", err)
	}
	if err := process.InsertJobs(ctx, tx, client, jobs, process.DefaultMaxAttempts); err != nil {
		return 0, err
	}
	return len(listed), nil
}
