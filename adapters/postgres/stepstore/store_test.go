package stepstore

import (
	"bookingledger/adapters/process"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"bookingledger/projections"
)

// TestResolveAppliesTheOperatorsAction: a step item's resolution sets its step by the action
// (mark-done ⇒ done, skip ⇒ skipped, retry ⇒ pending with a job and no finish time) and closes the
// item; a closed item, an item that is not a step's and a step no longer needing reconciliation are
// refused and change nothing.
func TestResolveAppliesTheOperatorsAction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPlanWorld(t)
	client, err := InsertOnlyClient(w.pool)
	require.NoError(t, err)
	store := NewStore(w.pool, client)
	item := func(kind, state string) int64 {
		t.Helper()
		w.seq++
		key := process.StepKey(fmt.Sprintf("resolve-%d", w.seq), process.EmailConfirmation, "")
		_, err := w.pool.Exec(ctx, `INSERT INTO process_steps (key, kind, thread, booking, answers, state, attempts, finished_at)
VALUES ($1, 'invitee_email.confirmation', 'r', 'r', 'active', $2, 1, now())`, key, state)
		require.NoError(t, err)
		var id int64
		require.NoError(t, w.pool.QueryRow(ctx, `INSERT INTO reconciliation_items (kind, subject, booking, reason) VALUES ($1, $2, 'r', 'unknown') RETURNING id`,
			kind, "step "+key.String()).Scan(&id))
		return id
	}
	for action, want := range map[Action]process.State{ActionMarkDone: process.StateDone, ActionSkip: process.StateSkipped, ActionRetry: process.StatePending} {
		id := item("step", string(process.StateNeedsReconciliation))
		it, st, err := store.Resolve(ctx, id, action, "checked", "test")
		require.NoError(t, err, action)
		require.NotNil(t, it.ClosedAt, action)
		var state string
		var finished bool
		var jobs int
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT state, finished_at IS NOT NULL, (SELECT count(*) FROM river_job WHERE args->>'step' = s.id::text)
FROM process_steps s WHERE id = $1`, st.ID).Scan(&state, &finished, &jobs))
		require.Equal(t, string(want), state, action)
		require.Equal(t, want != process.StatePending, finished, action)
		require.Equal(t, map[bool]int{true: 1}[want == process.StatePending], jobs, action)
		_, _, err = store.Resolve(ctx, id, action, "again", "test")
		require.ErrorIs(t, err, projections.ErrItemClosed, action)
	}
	_, _, err = store.Resolve(ctx, item("step", string(process.StateDone)), ActionRetry, "checked", "test")
	require.ErrorIs(t, err, projections.ErrInvalidQuery, "a step no longer needing reconciliation")
	_, _, err = store.Resolve(ctx, item("conflict", string(process.StateNeedsReconciliation)), ActionMarkDone, "checked", "test")
	require.ErrorIs(t, err, projections.ErrInvalidQuery, "not a step's item")
	var open, jobs int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM reconciliation_items WHERE closed_at IS NULL), (SELECT count(*) FROM river_job)`).Scan(&open, &jobs))
	require.Equal(t, 2, open, "refused resolutions close nothing")
	require.Equal(t, 1, jobs, "only the retry queued a job")
}

// TestSweepLeavesAStepWhoseJobJustStarted: between River starting a step's job and its worker taking
// the step's lease, the step is requested with its lease long ended and its job running; the sweep
// leaves it alone (a second job would be a second caller of the target). A job running since before
// the grace is a stopped worker's, and the sweep queues the step again.
func TestSweepLeavesAStepWhoseJobJustStarted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPlanWorld(t)
	client, err := InsertOnlyClient(w.pool)
	require.NoError(t, err)
	step := func(thread string, startedAgo time.Duration) int64 {
		t.Helper()
		var id int64
		require.NoError(t, w.pool.QueryRow(ctx, `INSERT INTO process_steps (key, kind, thread, booking, answers, state, attempts, lease_until)
VALUES ($1, 'invitee_email.confirmation', $2, $2, 'active', 'requested', 1, now() - interval '1 hour') RETURNING id`,
			process.StepKey(thread, process.EmailConfirmation, ""), thread).Scan(&id))
		res, err := client.Insert(ctx, process.StepArgs{Step: id}, nil)
		require.NoError(t, err)
		_, err = w.pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - $2::interval WHERE id = $1`,
			res.Job.ID, startedAgo.String())
		require.NoError(t, err)
		return id
	}
	jobs := func(id int64) int {
		t.Helper()
		var n int
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE args @> jsonb_build_object('step', $1::bigint)`, id).Scan(&n))
		return n
	}
	starting, stopped := step("sweep-starting", time.Second), step("sweep-stopped", 10*time.Minute)

	n, err := Sweep(ctx, w.pool, client, time.Minute, process.DefaultMaxAttempts)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, jobs(starting), "the job River just started is the step's caller")
	require.Equal(t, 2, jobs(stopped), "a stopped worker's step is queued again")
}

// insertStep stores a step of kind for booking in thread, in state, as the planner and the workers
// leave it, and returns its id.
func insertStep(t *testing.T, w *planWorld, thread, booking string, kind process.Kind, state process.State) int64 {
	t.Helper()
	w.seq++
	var id int64
	require.NoError(t, w.pool.QueryRow(context.Background(), `INSERT INTO process_steps (key, kind, thread, booking, answers, state)
VALUES ($1, $2, $3, $4, 'active', $5) RETURNING id`, process.StepKey(thread, kind, fmt.Sprint(w.seq)), string(kind), thread, booking, string(state)).Scan(&id))
	return id
}

func stepIDs(steps []process.Step) []int64 {
	out := make([]int64, len(steps))
	for i, s := range steps {
		out[i] = s.ID
	}
	return out
}

// TestForBookingFindsTheBookingsThreads: a booking's history shows every step of the threads it
// belongs to, oldest first: those it has steps in, and the one it began — a thread keeps its first
// booking's name after a reschedule, and that booking may have no step of its own (it was moved
// before any was planned). Other threads' steps are not shown.
func TestForBookingFindsTheBookingsThreads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPlanWorld(t)
	store := NewStore(w.pool, nil)
	moved := []int64{
		insertStep(t, w, "calendly-f1", "calendly-f2", process.CalendarCreate, process.StateDone),
		insertStep(t, w, "calendly-f1", "calendly-f2", process.EmailConfirmation, process.StateDone),
	}
	insertStep(t, w, "calendly-g1", "calendly-g1", process.CalendarCreate, process.StateDone)
	moved = append(moved, insertStep(t, w, "calendly-f1", "calendly-f3", process.CalendarUpdate, process.StatePending))
	for _, b := range []string{"calendly-f1", "calendly-f2", "calendly-f3"} {
		steps, err := store.ForBooking(ctx, b)
		require.NoError(t, err)
		require.Equal(t, moved, stepIDs(steps), "the steps of %s's thread, oldest first", b)
	}
	steps, err := store.ForBooking(ctx, "calendly-nobody")
	require.NoError(t, err)
	require.Empty(t, steps)
}

// TestListShowsTheNewestStepsInAState: List returns the steps in the state asked for (every state
// when none), newest first, at most MaxList of them; a state that does not exist is refused.
func TestListShowsTheNewestStepsInAState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPlanWorld(t)
	store := NewStore(w.pool, nil)
	var done []int64
	for i, st := range []process.State{process.StateDone, process.StatePending, process.StateDone, process.StateNeedsReconciliation, process.StateDone} {
		id := insertStep(t, w, fmt.Sprintf("calendly-l%d", i), fmt.Sprintf("calendly-l%d", i), process.EmailConfirmation, st)
		if st == process.StateDone {
			done = append([]int64{id}, done...)
		}
	}
	got, err := store.List(ctx, process.StateDone)
	require.NoError(t, err)
	require.Equal(t, done, stepIDs(got), "the done steps, newest first")

	all, err := store.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, all, 5)
	require.IsDecreasing(t, stepIDs(all), "every step, newest first")

	_, err = store.List(ctx, "sent")
	require.ErrorIs(t, err, ErrInvalidState)

	_, err = w.pool.Exec(ctx, `INSERT INTO process_steps (key, kind, thread, booking, answers, state)
SELECT gen_random_uuid(), 'invitee_email.confirmation', 'calendly-many-' || i, 'calendly-many-' || i, 'active', 'done'
FROM generate_series(1, $1::int) i`, MaxList)
	require.NoError(t, err)
	var newest int64
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT max(id) FROM process_steps`).Scan(&newest))
	for _, st := range []process.State{"", process.StateDone} {
		got, err := store.List(ctx, st)
		require.NoError(t, err)
		require.Len(t, got, MaxList, "state %q", st)
		require.Equal(t, newest, got[0].ID, "state %q: the newest first", st)
	}
}

// TestCountsCountsStepsByKindAndState: the metrics' counts are every step's, by kind and state.
func TestCountsCountsStepsByKindAndState(t *testing.T) {
	t.Parallel()
	w := newPlanWorld(t)
	for i, s := range []struct {
		kind  process.Kind
		state process.State
	}{{process.CalendarCreate, process.StateDone}, {process.CalendarCreate, process.StateDone}, {process.CalendarCreate, process.StateSkipped}, {process.EmailConfirmation, process.StateDone},
		{process.EmailConfirmation, process.StateNeedsReconciliation}, {process.EmailCancellation, process.StatePending}, {process.CalendarCreate, process.StateFailed}} {
		insertStep(t, w, fmt.Sprintf("calendly-c%d", i), fmt.Sprintf("calendly-c%d", i), s.kind, s.state)
	}
	got, err := NewStore(w.pool, nil).Counts(context.Background())
	require.NoError(t, err)
	require.Equal(t, map[process.Kind]map[process.State]int64{
		process.CalendarCreate:    {process.StateDone: 2, process.StateSkipped: 1, process.StateFailed: 1},
		process.EmailConfirmation: {process.StateDone: 1, process.StateNeedsReconciliation: 1},
		process.EmailCancellation: {process.StatePending: 1},
	}, got)
}

// TestSweepWaitsOutTheGrace: a requested step whose lease ended less than the grace ago is left to
// its worker (its outcome may be on its way, or River is about to run its retry); one whose lease
// ended longer ago is queued again, and only once however often the sweep runs. Steps in other
// states are not the sweep's, whatever their lease says.
func TestSweepWaitsOutTheGrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPlanWorld(t)
	client, err := InsertOnlyClient(w.pool)
	require.NoError(t, err)
	step := func(thread string, state process.State, leaseEnded time.Duration) int64 {
		t.Helper()
		id := insertStep(t, w, thread, thread, process.EmailConfirmation, state)
		_, err := w.pool.Exec(ctx, `UPDATE process_steps SET attempts = 1, lease_until = now() - $2::interval WHERE id = $1`, id, leaseEnded.String())
		require.NoError(t, err)
		return id
	}
	step("calendly-grace-recent", process.StateRequested, 30*time.Second)
	old := step("calendly-grace-old", process.StateRequested, 2*time.Minute)
	step("calendly-grace-done", process.StateDone, time.Hour)

	for i, want := range []int{1, 0} {
		n, err := Sweep(ctx, w.pool, client, time.Minute, process.DefaultMaxAttempts)
		require.NoError(t, err)
		require.Equal(t, want, n, "sweep %d", i)
		var jobs []int64
		require.NoError(t, pgxscanInts(w.pool, &jobs, `SELECT (args->>'step')::bigint FROM river_job WHERE kind = $1 AND queue = $2 ORDER BY id`,
			process.StepArgs{}.Kind(), process.Queue))
		require.Equal(t, []int64{old}, jobs, "sweep %d: only the step whose lease ended before the grace is queued, once", i)
	}
}

func pgxscanInts(pool *pgxpool.Pool, out *[]int64, sql string, args ...any) error {
	r, err := pool.Query(context.Background(), sql, args...)
	if err != nil {
		return err
	}
	*out, err = pgx.CollectRows(r, pgx.RowTo[int64])
	return err
}

// TestSweepLeavesAStepWhoseJobWaits: a stopped worker's step (requested, its lease long over) whose
// job is still to run — available, scheduled, retryable (an unknown outcome's retry) or pending — is
// that job's to probe; another job would be a second caller. A step whose job is finished
// (completed, discarded, cancelled) is queued again.
func TestSweepLeavesAStepWhoseJobWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPlanWorld(t)
	client, err := InsertOnlyClient(w.pool)
	require.NoError(t, err)
	queued := map[string]bool{"available": false, "scheduled": false, "retryable": false, "pending": false,
		"completed": true, "discarded": true, "cancelled": true}
	ids := map[string]int64{}
	for state := range queued {
		id := insertStep(t, w, "calendly-job-"+state, "calendly-job-"+state, process.CalendarCreate, process.StateRequested)
		_, err := w.pool.Exec(ctx, `UPDATE process_steps SET attempts = 1, lease_until = now() - interval '1 hour' WHERE id = $1`, id)
		require.NoError(t, err)
		res, err := client.Insert(ctx, process.StepArgs{Step: id}, &river.InsertOpts{Queue: process.Queue})
		require.NoError(t, err)
		_, err = w.pool.Exec(ctx, `UPDATE river_job SET state = $2, finalized_at = CASE WHEN $3 THEN now() END WHERE id = $1`, res.Job.ID, state, queued[state])
		require.NoError(t, err, state)
		ids[state] = id
	}
	n, err := Sweep(ctx, w.pool, client, time.Minute, process.DefaultMaxAttempts)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for state, id := range ids {
		var jobs int
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE args @> jsonb_build_object('step', $1::bigint)`, id).Scan(&jobs))
		require.Equal(t, map[bool]int{false: 1, true: 2}[queued[state]], jobs, "a step whose job is %s", state)
	}
}

// TestResolveRefusesAnIncompleteResolution: a resolution must name who resolves it and carry a note
// (at most MaxNoteLength bytes) and one of the actions; retry needs the job queue. A refused one
// leaves the item open and the step as it was. An accepted one records the operator's note on the
// step and who resolved the item.
func TestResolveRefusesAnIncompleteResolution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPlanWorld(t)
	id := insertStep(t, w, "calendly-refused", "calendly-refused", process.EmailConfirmation, process.StateNeedsReconciliation)
	var key string
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT key::text FROM process_steps WHERE id = $1`, id).Scan(&key))
	_, err := w.pool.Exec(ctx, `UPDATE process_steps SET note = 'outcome unknown: check the mail server' WHERE id = $1`, id)
	require.NoError(t, err)
	var item int64
	require.NoError(t, w.pool.QueryRow(ctx, `INSERT INTO reconciliation_items (kind, subject, booking, reason) VALUES ('step', $1, 'calendly-refused', 'unknown') RETURNING id`,
		"step "+key).Scan(&item))
	noQueue := NewStore(w.pool, nil)
	for _, c := range []struct {
		name            string
		action          Action
		note, by        string
		invalid, anyErr bool
	}{
		{name: "nobody", action: ActionSkip, note: "checked", by: "  ", invalid: true},
		{name: "no note", action: ActionSkip, note: " ", by: "cli:ops", invalid: true},
		{name: "a note too long", action: ActionSkip, note: strings.Repeat("n", MaxNoteLength+1), by: "cli:ops", invalid: true},
		{name: "an unknown action", action: "resend", note: "checked", by: "cli:ops", invalid: true},
		{name: "retry without the job queue", action: ActionRetry, note: "checked", by: "cli:ops", anyErr: true},
	} {
		_, _, err := noQueue.Resolve(ctx, item, c.action, c.note, c.by)
		require.Error(t, err, c.name)
		if c.invalid {
			require.ErrorIs(t, err, projections.ErrInvalidQuery, c.name)
		}
		var state string
		var open bool
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT s.state, i.closed_at IS NULL FROM process_steps s, reconciliation_items i WHERE s.id = $1 AND i.id = $2`,
			id, item).Scan(&state, &open))
		require.Equal(t, string(process.StateNeedsReconciliation), state, c.name)
		require.True(t, open, c.name)
	}

	it, st, err := noQueue.Resolve(ctx, item, ActionSkip, " sent by hand ", " cli:ops ")
	require.NoError(t, err)
	require.Equal(t, "operator skip: sent by hand", st.Note)
	require.Equal(t, "cli:ops", it.ResolvedBy)
	var note, resolvedBy string
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT s.note, i.resolved_by FROM process_steps s, reconciliation_items i WHERE s.id = $1 AND i.id = $2`,
		id, item).Scan(&note, &resolvedBy))
	require.Equal(t, "operator skip: sent by hand", note)
	require.Equal(t, "cli:ops", resolvedBy)
}
