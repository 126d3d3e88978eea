package checkpoint_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/domain/eventlog"
	"bookingledger/projections"
)

// idleProjection is a projection whose batches are idle while idle holds; busy batches count their
// events in applied.
func idleProjection(t *testing.T, pool *pgxpool.Pool, idle *atomic.Bool, applied *atomic.Int32) *checkpoint.Projection {
	t.Helper()
	p, err := checkpoint.New(pool, checkpoint.Config{
		Name: "seen",
		Apply: func(ctx context.Context, tx pgx.Tx, events []eventlog.RecordedEvent) error {
			applied.Add(int32(len(events)))
			return nil
		},
		Idle: func(context.Context) (bool, error) { return idle.Load(), nil },
	})
	require.NoError(t, err)
	return p
}

// rowVersion is the checkpoint row's xmin: it changes with every write of the row.
func rowVersion(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var v string
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT xmin::text FROM projection_checkpoints WHERE name = 'seen'`).Scan(&v))
	return v
}

// TestIdleBatchesAreSavedTogetherWithinIdleFlush: idle batches one after another do not write the
// checkpoint row each (a default serve's process and relay projections did, per delivery); the row
// is written at most once per IdleFlush while they come, and reaches the last of them and counts
// every event within IdleFlush after they stop, without a further batch.
func TestIdleBatchesAreSavedTogetherWithinIdleFlush(t *testing.T) {
	pool, store := setup(t)
	ctx := context.Background()
	appendEvents(t, pool, store, 60, 1)
	recs := readAll(t, store)
	var idle atomic.Bool
	idle.Store(true)
	var applied atomic.Int32
	p := idleProjection(t, pool, &idle, &applied)
	_, err := p.Load(ctx)
	require.NoError(t, err)

	versions := map[string]bool{rowVersion(t, pool): true}
	start := time.Now()
	for i := range recs {
		require.NoError(t, p.Apply(ctx, recs[i:i+1]))
		versions[rowVersion(t, pool)] = true
	}
	elapsed := time.Since(start)
	writes := len(versions) - 1
	assert.LessOrEqual(t, writes, int(elapsed/checkpoint.IdleFlush)+1,
		"%d idle batches in %v wrote the checkpoint row %d times", len(recs), elapsed, writes)

	last := recs[len(recs)-1].Position
	require.Eventually(t, func() bool {
		cp, err := checkpoint.Read(ctx, pool, "seen")
		return err == nil && cp.Position == last && cp.EventsApplied == int64(len(recs))
	}, 10*checkpoint.IdleFlush, checkpoint.IdleFlush/10, "the idle batches' checkpoint was not saved")
	assert.Zero(t, applied.Load())
}

// TestABusyBatchSavesTheIdleOnesBeforeIt: a batch that writes moves the checkpoint from where it is
// saved, past the idle batches not saved yet, in its own transaction, and counts their events.
func TestABusyBatchSavesTheIdleOnesBeforeIt(t *testing.T) {
	pool, store := setup(t)
	ctx := context.Background()
	appendEvents(t, pool, store, 4, 1)
	recs := readAll(t, store)
	var idle atomic.Bool
	idle.Store(true)
	var applied atomic.Int32
	p := idleProjection(t, pool, &idle, &applied)
	_, err := p.Load(ctx)
	require.NoError(t, err)
	require.NoError(t, p.Apply(ctx, recs[:3]))

	idle.Store(false)                          // asked before every batch while they are idle
	require.NoError(t, p.Apply(ctx, recs[2:])) // overlaps what was applied idly
	assert.EqualValues(t, 1, applied.Load(), "only the event after the idle batch is applied")
	cp, err := checkpoint.Read(ctx, pool, "seen")
	require.NoError(t, err)
	assert.Equal(t, recs[3].Position, cp.Position)
	assert.EqualValues(t, 4, cp.EventsApplied)
}

// TestIdleBatchesOfAnEndedLeaseAreNotSaved: the deferred write does not outlive the context of the
// batch that deferred it (a runner's ends when its lock is lost), and a runner that loads the
// checkpoint again applies from what was saved.
func TestIdleBatchesOfAnEndedLeaseAreNotSaved(t *testing.T) {
	pool, store := setup(t)
	ctx := context.Background()
	appendEvents(t, pool, store, 2, 1)
	recs := readAll(t, store)
	var idle atomic.Bool
	idle.Store(true)
	var applied atomic.Int32
	p := idleProjection(t, pool, &idle, &applied)
	_, err := p.Load(ctx)
	require.NoError(t, err)
	before := rowVersion(t, pool)

	lease, lost := context.WithCancel(ctx)
	require.NoError(t, p.Apply(lease, recs))
	lost()
	time.Sleep(3 * checkpoint.IdleFlush)
	assert.Equal(t, before, rowVersion(t, pool), "written after the lease ended")

	pos, err := p.Load(ctx)
	require.NoError(t, err)
	assert.Equal(t, eventlog.Position{}, pos)
	n, err := projections.NewRunner(store, p, checkpoint.NewLocker(pool), projections.RunnerOptions{}).CatchUp(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2, n, "the events not saved are applied again")
	cp, err := checkpoint.Read(ctx, pool, "seen")
	require.NoError(t, err)
	assert.Equal(t, recs[1].Position, cp.Position, "a catch-up saves its idle batches when it reaches the end")
}
