package jobs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/jobs"
	"bookingledger/adapters/jobs/jobstest"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
)

func livenessDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.NewDatabaseWith(t, jobstest.Template)
	require.NoError(t, postgres.Migrate(t.Context(), pool))
	_, err := jobs.Migrate(t.Context(), pool, nil)
	require.NoError(t, err)
	return pool
}

// runningJob inserts a job that client is running, started ago.
func runningJob(t *testing.T, pool *pgxpool.Pool, client string, ago time.Duration, attempt, maxAttempts int) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(t.Context(), `INSERT INTO river_job (kind, args, queue, state, attempt, attempted_at, attempted_by, max_attempts, priority, scheduled_at)
VALUES ('test.liveness', '{"n":1}', 'default', 'running', $2, now() - $3::interval, ARRAY['someone-earlier', $1], $4, 1, now()) RETURNING id`,
		client, attempt, ago.String(), maxAttempts).Scan(&id))
	return id
}

func jobState(t *testing.T, pool *pgxpool.Pool, id int64) (state string, maxAttempts, errs int) {
	t.Helper()
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT state, max_attempts, coalesce(array_length(errors, 1), 0) FROM river_job WHERE id = $1`, id).
		Scan(&state, &maxAttempts, &errs))
	return state, maxAttempts, errs
}

// TestLivenessPutsBackTheJobsOfADeadInstanceOnly: while an instance's lock session lives, nothing of
// it is touched; once the session ends, the next check of another instance makes its running jobs
// available at once (a job on its last attempt gets one more), calls the hooks with them in the same
// transaction, and forgets the instance. Jobs of a live instance and finished jobs stay as they are.
func TestLivenessPutsBackTheJobsOfADeadInstanceOnly(t *testing.T) {
	t.Parallel()
	pool := livenessDB(t)
	ctx := t.Context()
	dead := jobs.NewLiveness(pool, "dead-1", nil)
	require.NoError(t, dead.Register(ctx))
	// Keep dead reachable until its session is terminated below: a Liveness nobody references is
	// garbage, and the finalizer of its connection's socket would end the session (and release
	// the lock) at whatever moment the collector runs.
	t.Cleanup(func() { dead.Stop(context.Background()) })
	alive := jobs.NewLiveness(pool, "alive-1", nil)
	require.NoError(t, alive.Register(ctx))
	t.Cleanup(func() { alive.Stop(context.Background()) })
	var hooked []jobs.Rescued
	checker := jobs.NewLiveness(pool, "checker", nil, func(ctx context.Context, tx pgx.Tx, r jobs.Rescued) error {
		var n int
		// The hook sees the jobs already available, in the rescue's transaction.
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'available'`).Scan(&n); err != nil {
			return err
		}
		if n == len(r.Jobs) {
			hooked = append(hooked, r)
		}
		return nil
	})
	require.NoError(t, checker.Register(ctx))
	t.Cleanup(func() { checker.Stop(context.Background()) })

	deadJob := runningJob(t, pool, "dead-1", time.Second, 1, 5)
	lastAttempt := runningJob(t, pool, "dead-1", time.Second, 5, 5)
	aliveJob := runningJob(t, pool, "alive-1", time.Hour, 1, 5)
	_, err := pool.Exec(ctx, `INSERT INTO river_job (kind, args, queue, state, attempt, attempted_by, max_attempts, priority, finalized_at)
VALUES ('test.liveness', '{}', 'default', 'completed', 1, ARRAY['dead-1'], 5, 1, now())`)
	require.NoError(t, err)

	r, err := checker.Check(ctx)
	require.NoError(t, err)
	assert.Empty(t, r.Dead, "a live session means a live instance")
	assert.Empty(t, r.Jobs)

	_, err = pool.Exec(ctx, `SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN job_instances i ON l.locktype = 'advisory'
AND l.classid = 1651 AND l.objid = i.id::oid AND l.objsubid = 2
AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) WHERE i.client_id = 'dead-1'`)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		r, err = checker.Check(ctx)
		require.NoError(t, err)
		return len(r.Dead) > 0
	}, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, []string{"dead-1"}, r.Dead)
	assert.ElementsMatch(t, []int64{deadJob, lastAttempt}, []int64{r.Jobs[0].ID, r.Jobs[1].ID})
	require.Len(t, hooked, 1)

	st, maxA, errs := jobState(t, pool, deadJob)
	assert.Equal(t, "available", st)
	assert.Equal(t, 5, maxA)
	assert.Equal(t, 1, errs, "the put-back is told in the job's errors")
	st, maxA, _ = jobState(t, pool, lastAttempt)
	assert.Equal(t, "available", st)
	assert.Equal(t, 6, maxA, "a death on the last attempt leaves one more")
	st, _, _ = jobState(t, pool, aliveJob)
	assert.Equal(t, "running", st)

	var instances []string
	rows, err := pool.Query(ctx, `SELECT client_id FROM job_instances ORDER BY client_id`)
	require.NoError(t, err)
	for rows.Next() {
		var c string
		require.NoError(t, rows.Scan(&c))
		instances = append(instances, c)
	}
	assert.Equal(t, []string{"alive-1", "checker"}, instances)

	// A second check finds nothing more.
	r, err = checker.Check(ctx)
	require.NoError(t, err)
	assert.Empty(t, r.Jobs)
}

// TestLivenessConcurrentCheckersPutBackEachJobOnce: many instances noticing the same death at once
// put back each of its jobs exactly once.
func TestLivenessConcurrentCheckersPutBackEachJobOnce(t *testing.T) {
	t.Parallel()
	pool := livenessDB(t)
	ctx := t.Context()
	dead := jobs.NewLiveness(pool, "dead-2", nil)
	require.NoError(t, dead.Register(ctx))
	var ids []int64
	for range 20 {
		ids = append(ids, runningJob(t, pool, "dead-2", time.Second, 1, 5))
	}
	dead.Stop(ctx) // a clean stop forgets itself: register again and die uncleanly instead
	require.NoError(t, dead.Register(ctx))
	_, err := pool.Exec(ctx, `SELECT pg_terminate_backend(l.pid) FROM pg_locks l WHERE l.locktype = 'advisory' AND l.classid = 1651
AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	require.NoError(t, err)

	var mu sync.Mutex
	var got []int64
	var wg sync.WaitGroup
	for i := range 6 {
		c := jobs.NewLiveness(pool, "checker-"+string(rune('a'+i)), nil)
		wg.Go(func() {
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				r, err := c.Check(ctx)
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				for _, j := range r.Jobs {
					got = append(got, j.ID)
				}
				n := len(got)
				mu.Unlock()
				if n >= len(ids) {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	assert.ElementsMatch(t, ids, got, "each job once")
}

// TestLivenessPutsBackItsOwnOrphans: a job the database says this instance runs, started longer than
// the grace ago, that none of its workers runs (its result was lost with the database) is put back;
// one started within the grace is left to River's completion.
func TestLivenessPutsBackItsOwnOrphans(t *testing.T) {
	t.Parallel()
	pool := livenessDB(t)
	ctx := t.Context()
	me := jobs.NewLiveness(pool, "me", nil)
	me.SetTiming(0, 2*time.Second)
	require.NoError(t, me.Register(ctx))
	t.Cleanup(func() { me.Stop(context.Background()) })
	orphan := runningJob(t, pool, "me", 5*time.Second, 1, 5)
	fresh := runningJob(t, pool, "me", 0, 1, 5)
	r, err := me.Check(ctx)
	require.NoError(t, err)
	require.Len(t, r.Jobs, 1)
	assert.Equal(t, orphan, r.Jobs[0].ID)
	st, _, _ := jobState(t, pool, fresh)
	assert.Equal(t, "running", st)
}

// TestLivenessIsPerDatabase: advisory lock keys are per database, and pg_locks shows the whole
// cluster's: an instance of another database holding the same key does not keep a dead one alive.
func TestLivenessIsPerDatabase(t *testing.T) {
	t.Parallel()
	other := livenessDB(t)
	pool := livenessDB(t)
	ctx := t.Context()
	// The same id (1) in both databases.
	elsewhere := jobs.NewLiveness(other, "elsewhere", nil)
	require.NoError(t, elsewhere.Register(ctx))
	t.Cleanup(func() { elsewhere.Stop(context.Background()) })
	dead := jobs.NewLiveness(pool, "dead-3", nil)
	require.NoError(t, dead.Register(ctx))
	job := runningJob(t, pool, "dead-3", time.Second, 1, 5)
	_, err := pool.Exec(ctx, `SELECT pg_terminate_backend(l.pid) FROM pg_locks l WHERE l.locktype = 'advisory' AND l.classid = 1651
AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	require.NoError(t, err)
	checker := jobs.NewLiveness(pool, "checker", nil)
	require.Eventually(t, func() bool {
		r, err := checker.Check(ctx)
		require.NoError(t, err)
		return len(r.Jobs) == 1 && r.Jobs[0].ID == job
	}, 10*time.Second, 50*time.Millisecond)
}
