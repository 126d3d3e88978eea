package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/jobs"
	"bookingledger/adapters/jobs/jobstest"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/domain/ledger"
)

type pingArgs struct {
	N int `json:"n"`
}

func (pingArgs) Kind() string { return "bookingledger.test_ping" }

type pingWorker struct {
	river.WorkerDefaults[pingArgs]
	got chan int
}

func (w *pingWorker) Work(_ context.Context, job *river.Job[pingArgs]) error {
	w.got <- job.Args.N
	return nil
}

func TestFurtherKindsRunOnTheirOwnQueue(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDatabaseWith(t, jobstest.Template)
	ctx := context.Background()
	_, err := jobs.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	w := &pingWorker{got: make(chan int, 1)}
	q, err := jobs.New(jobs.Config{
		Pool: pool, Ledger: ledger.NewService(postgres.NewStore(pool), eventcodec.JSON{}), PollInterval: 50 * time.Millisecond,
		Kinds: []jobs.Kind{{Queue: "ping", Workers: 1, Register: func(ws *river.Workers) error { return river.AddWorkerSafely(ws, w) }}},
	})
	require.NoError(t, err)
	require.NoError(t, q.Start(ctx))
	t.Cleanup(func() { _ = q.Stop(context.Background()) })
	_, err = q.Client().Insert(ctx, pingArgs{N: 7}, &river.InsertOpts{Queue: "ping"})
	require.NoError(t, err)
	select {
	case n := <-w.got:
		assert.Equal(t, 7, n)
	case <-time.After(30 * time.Second):
		t.Fatal("job of a further kind never ran")
	}
}

func TestKindsMustNotShareAQueue(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDatabase(t)
	reg := func(*river.Workers) error { return nil }
	_, err := jobs.New(jobs.Config{Pool: pool, Ledger: ledger.NewService(postgres.NewStore(pool), eventcodec.JSON{}),
		Kinds: []jobs.Kind{{Queue: jobs.QueueDeferred, Register: reg}}})
	assert.ErrorContains(t, err, "taken")
}
