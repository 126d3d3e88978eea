package process

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"bookingledger/projections"
)

// TestResolveAppliesTheOperatorsAction: a step item's resolution sets its step by the action
// (mark-done ⇒ done, skip ⇒ skipped, retry ⇒ pending with a job and no finish time) and closes the
// item; a closed item, an item that is not a step's and a step no longer needing reconciliation are
// refused and change nothing.
func TestResolveAppliesTheOperatorsAction(t *testing.T) {
	ctx := context.Background()
	w := newPlanWorld(t)
	client, err := InsertOnlyClient(w.pool)
	require.NoError(t, err)
	store := NewStore(w.pool, client)
	item := func(kind, state string) int64 {
		t.Helper()
		w.seq++
		key := StepKey(fmt.Sprintf("resolve-%d", w.seq), EmailConfirmation, "")
		_, err := w.pool.Exec(ctx, `INSERT INTO process_steps (key, kind, thread, booking, answers, state, attempts, finished_at)
VALUES ($1, 'invitee_email.confirmation', 'r', 'r', 'active', $2, 1, now())`, key, state)
		require.NoError(t, err)
		var id int64
		require.NoError(t, w.pool.QueryRow(ctx, `INSERT INTO reconciliation_items (kind, subject, booking, reason) VALUES ($1, $2, 'r', 'unknown') RETURNING id`,
			kind, "step "+key.String()).Scan(&id))
		return id
	}
	for action, want := range map[Action]State{ActionMarkDone: StateDone, ActionSkip: StateSkipped, ActionRetry: StatePending} {
		id := item("step", string(StateNeedsReconciliation))
		it, st, err := store.Resolve(ctx, id, action, "checked", "test")
		require.NoError(t, err, action)
		require.NotNil(t, it.ClosedAt, action)
		var state string
		var finished bool
		var jobs int
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT state, finished_at IS NOT NULL, (SELECT count(*) FROM river_job WHERE args->>'step' = s.id::text)
FROM process_steps s WHERE id = $1`, st.ID).Scan(&state, &finished, &jobs))
		require.Equal(t, string(want), state, action)
		require.Equal(t, want != StatePending, finished, action)
		require.Equal(t, map[bool]int{true: 1}[want == StatePending], jobs, action)
		_, _, err = store.Resolve(ctx, id, action, "again", "test")
		require.ErrorIs(t, err, projections.ErrItemClosed, action)
	}
	_, _, err = store.Resolve(ctx, item("step", string(StateDone)), ActionRetry, "checked", "test")
	require.ErrorIs(t, err, projections.ErrInvalidQuery, "a step no longer needing reconciliation")
	_, _, err = store.Resolve(ctx, item("conflict", string(StateNeedsReconciliation)), ActionMarkDone, "checked", "test")
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
	ctx := context.Background()
	w := newPlanWorld(t)
	client, err := InsertOnlyClient(w.pool)
	require.NoError(t, err)
	step := func(thread string, startedAgo time.Duration) int64 {
		t.Helper()
		var id int64
		require.NoError(t, w.pool.QueryRow(ctx, `INSERT INTO process_steps (key, kind, thread, booking, answers, state, attempts, lease_until)
VALUES ($1, 'invitee_email.confirmation', $2, $2, 'active', 'requested', 1, now() - interval '1 hour') RETURNING id`,
			StepKey(thread, EmailConfirmation, ""), thread).Scan(&id))
		res, err := client.Insert(ctx, StepArgs{Step: id}, nil)
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

	n, err := Sweep(ctx, w.pool, client, time.Minute, DefaultMaxAttempts)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, jobs(starting), "the job River just started is the step's caller")
	require.Equal(t, 2, jobs(stopped), "a stopped worker's step is queued again")
}
