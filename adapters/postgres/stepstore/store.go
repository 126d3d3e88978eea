package stepstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/process"
	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
	"bookingledger/projections/history"
)

// Store reads steps and applies operators' resolutions.
type Store struct {
	pool        *pgxpool.Pool
	client      *river.Client[pgx.Tx] // for retry; nil: retry refused
	maxAttempts int
}

// NewStore returns the store; client (optional) inserts the job of a retried step.
func NewStore(pool *pgxpool.Pool, client *river.Client[pgx.Tx]) *Store {
	return &Store{pool: pool, client: client, maxAttempts: process.DefaultMaxAttempts}
}

// ForBooking returns the steps of every thread the booking belongs to, oldest first.
func (s *Store) ForBooking(ctx context.Context, booking string) ([]process.Step, error) {
	return stepsOf(ctx, s.pool, `WHERE thread IN (SELECT thread FROM process_steps WHERE booking = $1 OR thread = $1) ORDER BY id`, booking)
}

// ErrInvalidState: the state filter names no state.
var ErrInvalidState = errors.New("unknown step state")

// MaxList bounds List.
const MaxList = 1000

// List returns steps in state (all when empty), newest first, at most MaxList.
//
// A state's listing names the state in its statement's text (one of process.States, checked here,
// never the caller's bytes), so that its plan may read the partial index of what is open
// (process_steps_open_idx) or failed (process_steps_failed_idx) — a plan made for any state could
// not — under IndexedPlanning, as the steps gauge's read: the inbox lists the failed steps at every
// load, and the table holds every step ever planned. Done and skipped steps are read newest first
// by id until MaxList are found.
func (s *Store) List(ctx context.Context, state process.State) ([]process.Step, error) {
	if state == "" {
		return stepsOf(ctx, s.pool, `ORDER BY id DESC LIMIT $1`, MaxList)
	}
	if !slices.Contains(process.States, state) {
		return nil, fmt.Errorf("%w %q (want one of %s)", ErrInvalidState, state, statesText())
	}
	var out []process.Step
	err := checkpoint.IndexedRead(ctx, s.pool, `SELECT `+stepColumns+` FROM process_steps WHERE state = '`+string(state)+`' ORDER BY id DESC LIMIT $1`,
		[]any{MaxList}, func(rows pgx.Rows) (err error) {
			out, err = scanSteps(rows)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("process: list %s steps: %w", state, err)
	}
	return out, nil
}

func statesText() string {
	out := make([]string, len(process.States))
	for i, st := range process.States {
		out[i] = string(st)
	}
	return strings.Join(out, ", ")
}

// countsSQL is Counts' read: the open steps through process_steps_open_idx (its predicate is this
// condition), the finished ones' sums.
const countsSQL = `SELECT kind, state, count(*) FROM process_steps
WHERE state IN ('pending', 'requested', 'needs_reconciliation') GROUP BY kind, state
UNION ALL
SELECT kind, state, sum(n)::bigint FROM process_step_finishes GROUP BY kind, state`

// foldFinishesSQL folds process_step_finishes into one row per kind and state when it holds more
// than $1 rows. It deletes the rows its snapshot shows and inserts their sums in one statement, so
// that every snapshot sums to the same counts. A fold that runs beside another waits for the rows the
// other deletes and, once it commits, skips them (they are gone) and does not see the sums the other
// inserted: each folds the rows it deleted, and the sums stay exact.
const foldFinishesSQL = `WITH gone AS (
    DELETE FROM process_step_finishes WHERE (SELECT count(*) FROM process_step_finishes) > $1
    RETURNING kind, state, n
), sums AS (
    INSERT INTO process_step_finishes (kind, state, n)
    SELECT kind, state, sum(n) FROM gone GROUP BY kind, state HAVING sum(n) <> 0
)
SELECT count(*) FROM gone`

// FoldFinishesAfter is how many rows of process_step_finishes the sweeper lets pile up before it
// folds them (FoldFinishes): one a finished step, about two a booking.
const FoldFinishesAfter = 1000

// FoldFinishes folds the finished steps' counts into one row per kind and state when more than after
// rows of them piled up, and returns how many rows it folded (0: it had no need). serve's step
// sweeper calls it every sweep (stepscmd.StartSweeper), so that the steps gauge sums a few rows
// whatever the history.
func FoldFinishes(ctx context.Context, pool *pgxpool.Pool, after int64) (int64, error) {
	var folded int64
	if err := pool.QueryRow(ctx, foldFinishesSQL, after).Scan(&folded); err != nil {
		return 0, fmt.Errorf("process: fold the finished steps' counts: %w", err)
	}
	return folded, nil
}

// Counts returns the number of steps by kind and state (the steps gauge, at every scrape): the open
// steps (pending, requested, needs_reconciliation) counted by the index of what is open, the finished
// ones (done, failed, skipped) summed from process_step_finishes, the +1 and -1 rows the table's
// triggers add as steps enter and leave those states (migration 0760, ADR 0027) — never by reading
// the whole history. It runs under IndexedPlanning: a connection that planned the open steps' count
// while process_steps was a page would otherwise keep scanning it whole as it grows.
func (s *Store) Counts(ctx context.Context) (map[process.Kind]map[process.State]int64, error) {
	out := map[process.Kind]map[process.State]int64{}
	err := checkpoint.IndexedRead(ctx, s.pool, countsSQL, nil, func(rows pgx.Rows) error {
		for rows.Next() {
			var k, st string
			var n int64
			if err := rows.Scan(&k, &st, &n); err != nil {
				return err
			}
			if n == 0 {
				continue // every step of it left the state
			}
			if out[process.Kind(k)] == nil {
				out[process.Kind(k)] = map[process.State]int64{}
			}
			out[process.Kind(k)][process.State(st)] = n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("process: count steps: %w", err)
	}
	return out, nil
}

// MaxNoteLength bounds an operator's note, as readmodel.MaxNoteLength does for other items.
const MaxNoteLength = 4000

// Action is an operator's resolution of a step that needs reconciliation.
type Action string

// Actions.
const (
	// ActionMarkDone: the operator checked the target and the effect happened.
	ActionMarkDone Action = "mark-done"
	// ActionRetry: the operator checked that nothing happened; the step runs again.
	ActionRetry Action = "retry"
	// ActionSkip: the effect is not wanted (or was done by hand); nothing is sent.
	ActionSkip Action = "skip"
)

// Actions lists the actions.
var Actions = []Action{ActionMarkDone, ActionRetry, ActionSkip}

// Resolve closes step item id with the operator's note and applies action to its step; by names the
// operator (a token's name, or the CLI's user), recorded as other resolutions record it. Errors wrap
// projections.ErrNotFound, ErrItemClosed or ErrInvalidQuery (unknown action, nobody named, not a step
// item, a step no longer needing reconciliation).
func (s *Store) Resolve(ctx context.Context, id int64, action Action, note, by string) (calendar.Item, process.Step, error) {
	note, by = strings.TrimSpace(note), strings.TrimSpace(by)
	if by == "" || len(by) > MaxNoteLength || !ledger.Storable(by) {
		return calendar.Item{}, process.Step{}, fmt.Errorf("%w: who resolves the item must be named (valid UTF-8 without NUL, at most %d bytes)", projections.ErrInvalidQuery, MaxNoteLength)
	}
	if note == "" {
		return calendar.Item{}, process.Step{}, fmt.Errorf("%w: a resolution note is required", projections.ErrInvalidQuery)
	}
	if len(note) > MaxNoteLength || !ledger.Storable(note) {
		return calendar.Item{}, process.Step{}, fmt.Errorf("%w: note must be valid UTF-8 without NUL, at most %d bytes", projections.ErrInvalidQuery, MaxNoteLength)
	}
	if !slices.Contains(Actions, action) {
		return calendar.Item{}, process.Step{}, fmt.Errorf("%w: action %q: want mark-done, retry or skip", projections.ErrInvalidQuery, action)
	}
	var item calendar.Item
	var step process.Step
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		kind, subject, closed, err := readmodel.LockItem(ctx, tx, id)
		switch {
		case err != nil:
			return err
		case kind != "step":
			return fmt.Errorf("%w: item %d is a %s item, not a step's: resolve it without --action", projections.ErrInvalidQuery, id, kind)
		case closed:
			return fmt.Errorf("item %d: %w", id, projections.ErrItemClosed)
		}
		key, err := uuid.Parse(strings.TrimPrefix(subject, "step "))
		if err != nil {
			return fmt.Errorf("item %d: subject %q names no step", id, subject)
		}
		steps, err := stepsOf(ctx, tx, `WHERE key = $1 FOR UPDATE`, key)
		if err != nil {
			return err
		}
		if len(steps) == 0 {
			return fmt.Errorf("step %s: %w", key, projections.ErrNotFound)
		}
		step = steps[0]
		if step.State != process.StateNeedsReconciliation && step.State != process.StateFailed {
			return fmt.Errorf("%w: step %s is %s, not needs_reconciliation or failed", projections.ErrInvalidQuery, key, step.State)
		}
		text := "operator " + string(action) + ": " + note
		switch action {
		case ActionMarkDone:
			step.State = process.StateDone
		case ActionSkip:
			step.State = process.StateSkipped
		case ActionRetry:
			if s.client == nil {
				return errors.New("retry needs the job queue")
			}
			step.State = process.StatePending
		}
		if _, err := tx.Exec(ctx, `UPDATE process_steps SET state = $2, note = $3, lease_until = NULL,
finished_at = CASE WHEN $2 = 'pending' THEN NULL ELSE now() END, updated_at = now() WHERE id = $1`, step.ID, string(step.State), text); err != nil {
			return fmt.Errorf("resolve step %s: %w", key, err)
		}
		if action == ActionRetry {
			if err := process.InsertJobs(ctx, tx, s.client, []process.StepArgs{{Step: step.ID, Booking: step.Booking}}, s.maxAttempts); err != nil {
				return err
			}
		}
		step.Note = text
		item, err = readmodel.CloseItem(ctx, tx, id, text, by)
		if err != nil {
			return err
		}
		item.ClosedBy = calendar.ClosedByOperator
		return nil
	})
	if err != nil {
		return calendar.Item{}, process.Step{}, fmt.Errorf("resolve item %d: %w", id, err)
	}
	return item, step, nil
}

// ResolveStep implements readapi.StepResolver.
func (s *Store) ResolveStep(ctx context.Context, id int64, action, note, by string) (calendar.Item, error) {
	it, _, err := s.Resolve(ctx, id, Action(action), note, by)
	return it, err
}

// Sweep inserts a job for every step left requested by a worker that stopped (its lease ran out more
// than grace ago, and no job of it waits to run), so that the next worker probes it or hands it to an
// operator. A step whose outcome was unknown is requested with its lease ended until its job's retry:
// that job is waiting, and another would be one more caller of the same target, every sweep. So is a
// job River has just started, whose worker has not yet taken the step's lease: running for less than
// grace (a stopped worker's job stays running until River rescues it, and began longer ago).
func Sweep(ctx context.Context, pool *pgxpool.Pool, client *river.Client[pgx.Tx], grace time.Duration, maxAttempts int) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		r, err := tx.Query(ctx, `UPDATE process_steps SET lease_until = now(), updated_at = now()
WHERE id IN (SELECT id FROM process_steps s WHERE state = 'requested' AND lease_until < now() - $1::interval
             AND NOT EXISTS (SELECT 1 FROM river_job j WHERE j.kind = $2 AND j.args @> jsonb_build_object('step', s.id)
                 AND (j.state IN ('available', 'pending', 'scheduled', 'retryable')
                      OR j.state = 'running' AND j.attempted_at > now() - $1::interval))
             ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED)
RETURNING id, booking`, grace.String(), process.StepArgs{}.Kind())
		if err != nil {
			return err
		}
		jobs, err := pgx.CollectRows(r, pgx.RowToStructByPos[process.StepArgs])
		if err != nil {
			return err
		}
		n = len(jobs)
		return process.InsertJobs(ctx, tx, client, jobs, maxAttempts)
	})
	if err != nil {
		return 0, fmt.Errorf("process: sweep: %w", err)
	}
	return n, nil
}

// StepsForBooking implements readmodel.StepSource: the steps of the booking's threads for its history.
func (s *Store) StepsForBooking(ctx context.Context, id booking.ID) ([]history.StepEntry, error) {
	steps, err := s.ForBooking(ctx, string(id))
	if err != nil {
		return nil, err
	}
	return Entries(steps), nil
}

// Entries converts steps for history and listings.
func Entries(steps []process.Step) []history.StepEntry {
	out := make([]history.StepEntry, len(steps))
	for i, st := range steps {
		out[i] = history.StepEntry{Key: st.Key.String(), Kind: string(st.Kind), State: string(st.State), Booking: st.Booking,
			Answers: st.Answers, Attempts: st.Attempts, CreatedAt: st.CreatedAt.UTC(), RequestedAt: st.RequestedAt, FinishedAt: st.FinishedAt,
			UpdatedAt: st.UpdatedAt.UTC(), LastError: st.LastError, Note: st.Note}
	}
	return out
}

// InsertOnlyClient is a River client that only inserts step jobs (commands that run no workers:
// `reconcile resolve --action retry`, `rebuild process`); serve's workers run them.
func InsertOnlyClient(pool *pgxpool.Pool) (*river.Client[pgx.Tx], error) {
	c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		return nil, fmt.Errorf("process: river client: %w", err)
	}
	return c, nil
}
