package relay

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/pgtest"
)

// TestStreakFollowsAttemptTimesNotCommitOrder (issue #36): rounds of concurrent jobs commit out of
// attempt order. A failure that ended before a success already counted belongs to no streak; a
// success that ended before a failure already counted does not end the streak; the success after
// every counted failure ends it with its one recovery.
func TestStreakFollowsAttemptTimesNotCommitOrder(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDatabase(t)
	ctx := context.Background()
	r, err := New(Config{Pool: pool})
	require.NoError(t, err)
	var ep int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO relay_endpoints (url, secret) VALUES ('http://127.0.0.1:1/hook', 'whsec_x') RETURNING id`).Scan(&ep))
	t0 := time.Now()
	count := func(ok bool, at int) string {
		t.Helper()
		var words string
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			notes, err := r.streak(ctx, tx, ep, ok, "503", t0.Add(time.Duration(at)*time.Second))
			for _, n := range notes {
				words += fmt.Sprintf("%s(%d) ", n.kind, n.failures)
			}
			return err
		}))
		return words
	}
	failures := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT consecutive_failures FROM relay_endpoints WHERE id = $1`, ep).Scan(&n))
		return n
	}
	assert.Empty(t, count(true, 10))
	assert.Empty(t, count(false, 1), "a failure older than a counted success starts no streak")
	assert.Zero(t, failures())
	assert.Equal(t, "failing(1) ", count(false, 11))
	for at := 12; at < 15; at++ {
		assert.Empty(t, count(false, at))
	}
	assert.Equal(t, "failing(5) ", count(false, 15))
	assert.Empty(t, count(true, 12), "a success older than a counted failure does not end the streak")
	assert.Equal(t, 5, failures())
	assert.Equal(t, "recovered(5) ", count(true, 20))
	assert.Empty(t, count(true, 21), "one recovery per streak")
	assert.Empty(t, count(false, 19), "no failing after a later success")
	assert.Zero(t, failures())
}
