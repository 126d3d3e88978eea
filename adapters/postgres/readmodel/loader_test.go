package readmodel

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testPool connects to the test cluster. The loader tests run jobs that touch no table, so they
// need no database of their own.
func testPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	url := os.Getenv("BOOKINGLEDGER_TEST_DATABASE_URL")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("BOOKINGLEDGER_TEST_DATABASE_URL is not set")
		}
		t.Skip("BOOKINGLEDGER_TEST_DATABASE_URL is not set; run `make test`, which starts a private PostgreSQL")
	}
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// A failed job fails the load, the jobs added after it are drained without running (add never
// blocks), and wait reports the failure. The first job holds its connection until the load is
// cancelled, so the failing job runs on the other one and both connections are past the failure
// before any later job can be taken: none of them may run, whatever the scheduling.
func TestLoaderStopsAtTheFirstFailure(t *testing.T) {
	t.Parallel()
	m := &ReadModel{pool: testPool(t)}
	injected := errors.New("injected load failure")
	var ran atomic.Int32
	ok := func(ctx context.Context, c pgx.Tx) error { ran.Add(1); return nil }
	l := m.startLoad(context.Background())
	l.add(func(ctx context.Context, c pgx.Tx) error {
		<-ctx.Done()
		return ctx.Err()
	})
	l.add(func(ctx context.Context, c pgx.Tx) error { return injected })
	done := make(chan error, 1)
	go func() {
		for range 20 {
			l.add(ok)
		}
		done <- l.wait()
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, injected)
	case <-time.After(30 * time.Second):
		t.Fatal("the load did not finish after a failed job")
	}
	assert.Zero(t, ran.Load(), "jobs after the failure still ran")
}

// abort cancels the jobs that are running and returns once they have stopped.
func TestLoaderAbortCancelsRunningJobs(t *testing.T) {
	t.Parallel()
	m := &ReadModel{pool: testPool(t)}
	started := make(chan struct{})
	var sawCancel atomic.Bool
	l := m.startLoad(context.Background())
	l.add(func(ctx context.Context, c pgx.Tx) error {
		close(started)
		<-ctx.Done()
		sawCancel.Store(errors.Is(context.Cause(ctx), errLoadAborted))
		return ctx.Err()
	})
	<-started
	l.abort()
	assert.True(t, sawCancel.Load())
}
