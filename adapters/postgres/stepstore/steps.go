package stepstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"bookingledger/adapters/process"
	"bookingledger/projections/steps"
)

// plannerSteps is what the planner reads of stored steps.
func plannerSteps(stored []process.Step) []steps.Step {
	out := make([]steps.Step, len(stored))
	for i, s := range stored {
		out[i] = steps.Step{Key: steps.Key(s.Key), Kind: s.Kind, Thread: s.Thread, Booking: s.Booking, State: s.State, Answers: s.Answers,
			After: steps.Key(s.After), Resource: s.Resource, Seat: s.Seat, Start: s.Start, End: s.End, Attempts: s.Attempts, Attendees: s.Attendees}
	}
	return out
}

// queuePlan queues plan's writes in b, in the plan's order; when b runs, the jobs of steps that need
// one are appended to jobs.
func queuePlan(b *pgx.Batch, plan steps.Plan, jobs *[]process.StepArgs) {
	collectID := func(row pgx.Row) error {
		var job process.StepArgs
		err := row.Scan(&job.Step, &job.Booking)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // not revived / planned before: re-planning finds the key
		}
		if err == nil {
			*jobs = append(*jobs, job)
		}
		return err
	}
	for _, s := range plan.Skip {
		b.Queue(`UPDATE process_steps SET state = 'skipped', note = $2, finished_at = now(), updated_at = now()
WHERE key = $1 AND state = 'pending'`, uuid.UUID(s.Key), s.Note)
	}
	for _, k := range plan.Revive {
		b.Queue(`UPDATE process_steps SET state = 'pending', note = 'wanted again', finished_at = NULL, updated_at = now()
WHERE key = $1 AND state = 'skipped' AND attempts = 0 RETURNING id, booking`, uuid.UUID(k)).QueryRow(collectID)
	}
	for _, s := range plan.Insert {
		var after *uuid.UUID
		if s.After != (steps.Key{}) {
			a := uuid.UUID(s.After)
			after = &a
		}
		b.Queue(`INSERT INTO process_steps (key, kind, thread, booking, answers, after_key, resource, slot_start, slot_end, seat, attendees)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (key) DO NOTHING RETURNING id, booking`,
			uuid.UUID(s.Key), string(s.Kind), s.Thread, s.Booking, s.Answers, after, s.Resource, nullTime(s.Start), nullTime(s.End), s.Seat,
			s.Attendees).QueryRow(collectID)
	}
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

const stepColumns = `id, key, kind, thread, booking, state, answers, after_key, resource, seat, slot_start, slot_end, attempts,
lease_until, target_href, target_etag, last_error, note, created_at, requested_at, finished_at, updated_at, attendees`

// qualifiedStepColumns are stepColumns of process_steps aliased s, for queries that join.
var qualifiedStepColumns = "s." + strings.ReplaceAll(strings.Join(strings.Fields(stepColumns), " "), ", ", ", s.")

func stepsOf(ctx context.Context, q querier, where string, args ...any) ([]process.Step, error) {
	r, err := q.Query(ctx, `SELECT `+stepColumns+` FROM process_steps `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("process: read steps: %w", err)
	}
	return scanSteps(r)
}

// scanSteps reads rows of stepColumns, each followed by the columns scanned into extra (the values
// of the last row remain in extra), and closes r.
func scanSteps(r pgx.Rows, extra ...any) ([]process.Step, error) {
	defer r.Close()
	var out []process.Step
	for r.Next() {
		var s process.Step
		var kind, state string
		var after *uuid.UUID
		var start, end, lease, req, fin *time.Time
		dest := append([]any{&s.ID, &s.Key, &kind, &s.Thread, &s.Booking, &state, &s.Answers, &after, &s.Resource, &s.Seat, &start, &end,
			&s.Attempts, &lease, &s.Href, &s.ETag, &s.LastError, &s.Note, &s.CreatedAt, &req, &fin, &s.UpdatedAt, &s.Attendees}, extra...)
		if err := r.Scan(dest...); err != nil {
			return nil, fmt.Errorf("process: read steps: %w", err)
		}
		s.Kind, s.State = process.Kind(kind), process.State(state)
		if after != nil {
			s.After = *after
		}
		s.Start, s.End, s.LeaseUntil, s.RequestedAt, s.FinishedAt = deref(start), deref(end), deref(lease), deref(req), deref(fin)
		out = append(out, s)
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("process: read steps: %w", err)
	}
	return out, nil
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
