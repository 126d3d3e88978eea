package relay

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The default schedule is docs/relay.md's table: eight attempts, the first at once.
func TestDefaultScheduleIsTheDocumentedOne(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []time.Duration{0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour,
		10 * time.Hour, 10 * time.Hour}, DefaultSchedule)
	assert.Equal(t, 0.1, DefaultJitter)
}

// newRelay builds a relay with cfg on a pool that never connects: wait needs none.
func newRelay(t *testing.T, cfg Config) *Relay {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	cfg.Pool = pool
	r, err := New(cfg)
	require.NoError(t, err)
	return r
}

// Each wait of the schedule is lengthened or shortened at random by up to the jitter (10 % by
// default), so retries of deliveries that failed together spread out; the first attempt waits for
// nothing, a negative jitter means none, one above 1 is 1 (no negative wait), and the schedule's end
// is the last attempt.
func TestWaitsAreJittered(t *testing.T) {
	t.Parallel()
	const draws = 200
	r := newRelay(t, Config{})
	for n, base := range DefaultSchedule {
		lo, hi := time.Duration(1<<62), time.Duration(0)
		for range draws {
			d, ok := r.schedule.Wait(n)
			require.True(t, ok)
			lo, hi = min(lo, d), max(hi, d)
		}
		if base == 0 {
			assert.Zero(t, hi, "attempt %d goes out at once", n+1)
			continue
		}
		assert.GreaterOrEqual(t, lo, base*9/10, "attempt %d: at most 10 %% shorter", n+1)
		assert.LessOrEqual(t, hi, base*11/10, "attempt %d: at most 10 %% longer", n+1)
		assert.Greater(t, hi-lo, base/10, "attempt %d: the waits spread over the jitter's range", n+1)
	}
	_, ok := r.schedule.Wait(len(DefaultSchedule))
	assert.False(t, ok, "no attempt after the schedule's last")

	none := newRelay(t, Config{Schedule: []time.Duration{0, time.Hour}, Jitter: -1})
	d, ok := none.schedule.Wait(1)
	require.True(t, ok)
	assert.Equal(t, time.Hour, d, "a negative jitter is none")

	whole := newRelay(t, Config{Schedule: []time.Duration{0, time.Hour}, Jitter: 5})
	for range draws {
		d, _ := whole.schedule.Wait(1)
		assert.GreaterOrEqual(t, d, time.Duration(0))
		assert.LessOrEqual(t, d, 2*time.Hour)
	}
}
