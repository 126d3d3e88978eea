package relaystore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/relaystore"
)

// Two transactions that lock two rows in opposite orders: PostgreSQL fails one of them to break the
// cycle, and that error is the one the relay runs its transaction again for.
func TestRetryableIsADeadlockRollback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDatabase(t)
	_, err := pool.Exec(ctx, `CREATE TABLE lockpair (id int PRIMARY KEY, n int); INSERT INTO lockpair VALUES (1, 0), (2, 0)`)
	require.NoError(t, err)
	first, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = first.Rollback(ctx) }()
	second, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = second.Rollback(ctx) }()
	_, err = first.Exec(ctx, `UPDATE lockpair SET n = 1 WHERE id = 1`)
	require.NoError(t, err)
	_, err = second.Exec(ctx, `UPDATE lockpair SET n = 1 WHERE id = 2`)
	require.NoError(t, err)
	firstErr := make(chan error, 1)
	go func() {
		_, err := first.Exec(ctx, `UPDATE lockpair SET n = 2 WHERE id = 2`)
		firstErr <- err
	}()
	_, err = second.Exec(ctx, `UPDATE lockpair SET n = 2 WHERE id = 1`)
	if err == nil {
		err = <-firstErr // the cycle was broken on the other side
	} else {
		require.NoError(t, second.Rollback(ctx)) // lets the first go on
		require.NoError(t, <-firstErr)
	}
	require.Error(t, err)
	assert.True(t, relaystore.Retryable(err), "a deadlock rollback: %v", err)

	assert.False(t, relaystore.Retryable(nil))
	assert.False(t, relaystore.Retryable(errors.New("record attempts: connection refused")))
	_, err = pool.Exec(ctx, `CREATE TABLE lonely (id int PRIMARY KEY); INSERT INTO lonely VALUES (1), (1)`)
	require.Error(t, err)
	assert.False(t, relaystore.Retryable(err), "a unique violation is not retried: %v", err)
}
