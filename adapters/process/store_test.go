package process

import (
	"context"
	"fmt"
	"testing"

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
