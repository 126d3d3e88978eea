package jobs_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/jobs"
)

// Backlog counts, by queue, the jobs still to finish: waiting, scheduled, retrying or running; a
// queue asked for without jobs is 0.
func TestBacklogCountsTheJobsNotFinished(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	states := []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
		rivertype.JobStateRunning, rivertype.JobStateScheduled, rivertype.JobStateCompleted, rivertype.JobStateCancelled,
		rivertype.JobStateDiscarded}
	for i := range states {
		r, v := deferred(fmt.Sprintf("changed-%d", i))
		_, err := e.queue.Defer(context.Background(), r, v)
		require.NoError(t, err)
	}
	require.Equal(t, len(states), e.count(t, `SELECT count(*) FROM river_job`))
	for i, s := range states {
		_, err := e.pool.Exec(context.Background(), `UPDATE river_job SET state = $2::river_job_state,
    finalized_at = CASE WHEN $2::text IN ('completed', 'cancelled', 'discarded') THEN now() END
WHERE id = (SELECT id FROM river_job ORDER BY id OFFSET $1 LIMIT 1)`, i, string(s))
		require.NoError(t, err)
	}
	_, err := e.pool.Exec(context.Background(), `INSERT INTO river_job (args, kind, max_attempts, queue, state, finalized_at)
VALUES ('{}', 'bookingledger.other', 1, 'steps', 'available', NULL), ('{}', 'bookingledger.other', 1, 'steps', 'completed', now())`)
	require.NoError(t, err)

	got, err := jobs.Backlog(context.Background(), e.pool, jobs.QueueDeferred, "relay")
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{jobs.QueueDeferred: 5, "relay": 0, "steps": 1}, got)
}
