package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/eventlog"
)

// TestEventsAfter: how far a reader at a position is behind is the events after it (not the one at
// it) that a reader can already see — an event committed while an older transaction is still open
// is not counted until that one ends — up to the limit.
func TestEventsAfter(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	_, err := s.Append(ctx, streamName(t), eventlog.NoStream(), events(t, 4))
	require.NoError(t, err)
	behind := func(pos eventlog.Position, limit int64) int64 {
		t.Helper()
		n, err := s.EventsAfter(ctx, pos, limit)
		require.NoError(t, err)
		return n
	}
	// The cluster's other transactions (other tests') hold the horizon back for a moment.
	require.Eventually(t, func() bool { return behind(eventlog.Position{}, 100) == 4 }, 20*time.Second, 10*time.Millisecond)
	all, err := s.ReadAll(ctx, eventlog.Position{}, 10)
	require.NoError(t, err)
	require.Len(t, all, 4)
	assert.Equal(t, int64(4), behind(eventlog.Position{}, 100), "a reader that never read")
	assert.Equal(t, int64(2), behind(all[1].Position, 100), "the events after the checkpoint, not the one at it")
	assert.Equal(t, int64(0), behind(all[3].Position, 100))
	assert.Equal(t, int64(3), behind(eventlog.Position{}, 3), "up to the limit")

	older, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = older.Rollback(context.Background()) }()
	_, err = older.Exec(ctx, `SELECT pg_current_xact_id()`) // takes a transaction id, as a running append does
	require.NoError(t, err)
	_, err = s.Append(ctx, streamName(t), eventlog.NoStream(), events(t, 1))
	require.NoError(t, err)
	assert.Equal(t, int64(0), behind(all[3].Position, 100), "not visible to readers while an older transaction runs")
	require.NoError(t, older.Commit(ctx))
	assert.Eventually(t, func() bool { return behind(all[3].Position, 100) == 1 }, 20*time.Second, 10*time.Millisecond)
}
