package checkpoint_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/domain/eventlog"
	"bookingledger/projections"
)

// seen is the test double of a second projection: one row per applied event, so that an event applied
// twice fails the primary key and an event skipped shows in the count.
const seenTable = `CREATE TABLE seen_events (id uuid PRIMARY KEY, stream text NOT NULL)`

// TestMain drops the package's spare databases once its tests have run.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := spares.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = cmp.Or(code, 1)
	}
	os.Exit(code)
}

// spares are the package's test databases (see pgtest.Spares), seen's table in them: a test that
// passed gives its database back emptied, with its pool's warm connections, to the next.
var spares = pgtest.Spares{Extra: pgtest.Extra{Name: "seenevents", Migrate: func(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, seenTable)
	return err
}}}

func seenProjection(t *testing.T, pool *pgxpool.Pool, failAt int) *checkpoint.Projection {
	t.Helper()
	applied := 0
	p, err := checkpoint.New(pool, checkpoint.Config{
		Name: "seen",
		Apply: func(ctx context.Context, tx pgx.Tx, events []eventlog.RecordedEvent) error {
			for _, e := range events {
				if failAt > 0 && applied == failAt {
					applied++
					return errors.New("injected failure")
				}
				applied++
				if _, err := tx.Exec(ctx, `INSERT INTO seen_events (id, stream) VALUES ($1, $2)`, uuid.UUID(e.ID), e.StreamID); err != nil {
					return err
				}
			}
			return nil
		},
		Reset: func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `TRUNCATE seen_events`)
			return err
		},
	})
	require.NoError(t, err)
	return p
}

func appendEvents(t *testing.T, pool *pgxpool.Pool, store *postgres.Store, streams, perStream int) {
	t.Helper()
	for s := range streams {
		for v := range perStream {
			id := uuid.New()
			_, err := store.Append(context.Background(), fmt.Sprintf("test-%d", s), eventlog.Any(),
				[]eventlog.EventData{{ID: eventlog.EventID(id), Type: "test.v1", Data: []byte(fmt.Sprintf(`{"v":%d}`, v))}})
			require.NoError(t, err)
		}
	}
	settle(t, pool, store)
}

// settle waits until the global log shows every stored event. Readers see only transactions older
// than the oldest one running anywhere in the cluster (ADR 0002), so a transaction of another test
// package's database can hide these for a moment; a catch-up that ran now would find fewer.
func settle(t *testing.T, pool *pgxpool.Pool, store *postgres.Store) {
	t.Helper()
	var stored int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM events`).Scan(&stored))
	require.Eventually(t, func() bool {
		seen, err := store.ReadAll(context.Background(), eventlog.Position{}, stored+1)
		return err == nil && len(seen) == stored
	}, 30*time.Second, 10*time.Millisecond, "%d stored events never all became visible", stored)
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM seen_events`).Scan(&n))
	return n
}

func setup(t *testing.T) (*pgxpool.Pool, *postgres.Store) {
	t.Helper()
	pool := spares.Database(t)
	return pool, postgres.NewStore(pool)
}

func TestProjectionAppliesEveryEventOnceAcrossRestarts(t *testing.T) {
	pool, store := setup(t)
	ctx := context.Background()
	appendEvents(t, pool, store, 5, 7)
	run := func() int64 {
		r := projections.NewRunner(store, seenProjection(t, pool, 0), checkpoint.NewLocker(pool), projections.RunnerOptions{BatchSize: 4})
		n, err := r.CatchUp(ctx)
		require.NoError(t, err)
		return n
	}
	assert.EqualValues(t, 35, run())
	assert.Equal(t, 35, count(t, pool))
	// A new process (fresh Load) applies nothing twice and only what is new.
	assert.EqualValues(t, 0, run())
	appendEvents(t, pool, store, 2, 3)
	assert.EqualValues(t, 6, run())
	assert.Equal(t, 41, count(t, pool))
}

func TestFailedBatchLeavesNeitherRowsNorCheckpoint(t *testing.T) {
	pool, store := setup(t)
	ctx := context.Background()
	appendEvents(t, pool, store, 1, 10)
	r := projections.NewRunner(store, seenProjection(t, pool, 6), checkpoint.NewLocker(pool), projections.RunnerOptions{BatchSize: 4})
	_, err := r.CatchUp(ctx)
	require.ErrorContains(t, err, "injected failure")
	// The first batch (4) committed; the second failed at its third event and left nothing.
	assert.Equal(t, 4, count(t, pool))
	pos, err := checkpoint.Load(ctx, pool, "seen")
	require.NoError(t, err)
	events, err := store.ReadAll(ctx, eventlog.Position{}, 4)
	require.NoError(t, err)
	assert.Equal(t, events[3].Position, pos)
	// The next runner resumes from the checkpoint.
	r = projections.NewRunner(store, seenProjection(t, pool, 0), checkpoint.NewLocker(pool), projections.RunnerOptions{BatchSize: 4})
	n, err := r.CatchUp(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 6, n)
	assert.Equal(t, 10, count(t, pool))
}

func TestStaleRunnerCannotCommitOverAnother(t *testing.T) {
	pool, store := setup(t)
	ctx := context.Background()
	appendEvents(t, pool, store, 1, 6)
	events, err := store.ReadAll(ctx, eventlog.Position{}, 10)
	require.NoError(t, err)
	a, b := seenProjection(t, pool, 0), seenProjection(t, pool, 0)
	_, err = a.Load(ctx)
	require.NoError(t, err)
	_, err = b.Load(ctx)
	require.NoError(t, err)
	// Both believe they are at the start; they race to apply the same batch. Exactly one commits.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, p := range []*checkpoint.Projection{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Apply(ctx, events[:3])
		}()
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
			// The loser's checkpoint update waits for the winner's row lock, then finds the row moved.
			assert.ErrorIs(t, err, projections.ErrCheckpointMoved)
		}
	}
	assert.Equal(t, 1, failed, "exactly one of two racing runners commits")
	assert.Equal(t, 3, count(t, pool))
}

// A batch that overlaps what was applied, the event at the saved position included, applies only
// what follows it; one wholly applied changes nothing.
func TestApplySkipsWhatWasApplied(t *testing.T) {
	pool, store := setup(t)
	ctx := context.Background()
	appendEvents(t, pool, store, 1, 6)
	events, err := store.ReadAll(ctx, eventlog.Position{}, 10)
	require.NoError(t, err)
	p := seenProjection(t, pool, 0)
	_, err = p.Load(ctx)
	require.NoError(t, err)
	require.NoError(t, p.Apply(ctx, events[:3]))
	require.NoError(t, p.Apply(ctx, events[2:5]), "events[2] was applied")
	require.NoError(t, p.Apply(ctx, events[:5]))
	assert.Equal(t, 5, count(t, pool))
	pos, err := checkpoint.Load(ctx, pool, "seen")
	require.NoError(t, err)
	assert.Equal(t, events[4].Position, pos)
}

func TestRebuildResetsAndReplaysOnce(t *testing.T) {
	pool, store := setup(t)
	ctx := context.Background()
	appendEvents(t, pool, store, 3, 4)
	r := projections.NewRunner(store, seenProjection(t, pool, 0), checkpoint.NewLocker(pool), projections.RunnerOptions{BatchSize: 5})
	_, err := r.CatchUp(ctx)
	require.NoError(t, err)
	var last projections.Progress
	require.NoError(t, r.Rebuild(ctx, func(p projections.Progress) { last = p }))
	assert.Equal(t, projections.Progress{Done: 12, Total: 12}, last)
	assert.Equal(t, 12, count(t, pool))
	var applied int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT events_applied FROM projection_checkpoints WHERE name = 'seen'`).Scan(&applied))
	assert.EqualValues(t, 12, applied)
	cp, err := checkpoint.Read(ctx, pool, "seen")
	require.NoError(t, err)
	assert.False(t, cp.Rebuilding, "nothing ends a rebuild of a projection on this package: its reset never starts one")
	assert.Equal(t, 12, count(t, pool))
}

// A projection that never ran reads as one at the start of the log, without a row of its own.
func TestReadOfAProjectionThatNeverRan(t *testing.T) {
	pool, _ := setup(t)
	cp, err := checkpoint.Read(context.Background(), pool, "never")
	require.NoError(t, err)
	assert.Equal(t, checkpoint.Checkpoint{Name: "never"}, cp)
}

// A position beyond the checkpoint's bigint columns is refused, not wrapped into a negative one.
func TestPositionsBeyondTheColumnsAreRefused(t *testing.T) {
	for _, to := range []eventlog.Position{{Commit: math.MaxInt64 + 1, Prepare: 1}, {Commit: 1, Prepare: math.MaxInt64 + 1}} {
		_, err := checkpoint.QueueAdvance(&pgx.Batch{}, "seen", eventlog.Position{}, to, 1)
		assert.ErrorContains(t, err, "does not fit", "%s", to)
	}
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	pool := spares.Database(t)
	apply := func(context.Context, pgx.Tx, []eventlog.RecordedEvent) error { return nil }
	for _, tc := range []struct {
		pool *pgxpool.Pool
		cfg  checkpoint.Config
	}{{nil, checkpoint.Config{Name: "x", Apply: apply}}, {pool, checkpoint.Config{Apply: apply}}, {pool, checkpoint.Config{Name: "x"}}} {
		_, err := checkpoint.New(tc.pool, tc.cfg)
		assert.Error(t, err)
	}
	_, err := checkpoint.New(pool, checkpoint.Config{Name: "x", Apply: apply})
	assert.NoError(t, err)
}

// A projection's lock is held by one lease at a time, beside other projections' locks; a lease whose
// session ends reports itself lost, and the lock is free again.
func TestLockElectsOneHolderPerProjection(t *testing.T) {
	pool, _ := setup(t)
	ctx := context.Background()
	locker := checkpoint.NewLocker(pool)
	lease, err := locker.TryAcquire(ctx, "seen")
	require.NoError(t, err)
	require.NotNil(t, lease)
	again, err := locker.TryAcquire(ctx, "seen")
	require.NoError(t, err)
	assert.Nil(t, again, "held")
	other, err := locker.TryAcquire(ctx, "another")
	require.NoError(t, err)
	require.NotNil(t, other, "another projection's lock is its own")
	other.Release(ctx)

	// The operators' query of LockKey's comment finds the holder.
	_, err = pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks
WHERE locktype = 'advisory' AND ((classid::bigint << 32) | objid::bigint) = $1`, checkpoint.LockKey("seen"))
	require.NoError(t, err)
	select {
	case <-lease.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("a lease whose session ended was not reported lost")
	}
	lease.Release(ctx)
	next, err := locker.TryAcquire(ctx, "seen")
	require.NoError(t, err)
	require.NotNil(t, next, "the lock went with the session")
	next.Release(ctx)
}

// TestIdleBatchesOnlyMoveTheCheckpoint: while Config.Idle says a batch would write nothing, the
// projection moves its checkpoint in a statement of its own and never calls Apply; once it says
// otherwise, batches are applied in their transaction again, and it is not asked again for
// IdleRecheck. The checkpoint counts every event either way, and a stale runner is fenced on both
// paths.
func TestIdleBatchesOnlyMoveTheCheckpoint(t *testing.T) {
	pool, store := setup(t)
	ctx := context.Background()
	var idle atomic.Bool
	idle.Store(true)
	var asked, applied atomic.Int32
	newProjection := func() *checkpoint.Projection {
		p, err := checkpoint.New(pool, checkpoint.Config{
			Name: "seen",
			Apply: func(ctx context.Context, tx pgx.Tx, events []eventlog.RecordedEvent) error {
				applied.Add(int32(len(events)))
				return nil
			},
			Idle: func(context.Context) (bool, error) { asked.Add(1); return idle.Load(), nil },
		})
		require.NoError(t, err)
		return p
	}
	p := newProjection()
	run := func() {
		t.Helper()
		_, err := projections.NewRunner(store, p, checkpoint.NewLocker(pool), projections.RunnerOptions{BatchSize: 3}).CatchUp(ctx)
		require.NoError(t, err)
	}
	appendEvents(t, pool, store, 2, 3)
	run()
	assert.Zero(t, applied.Load(), "an idle batch was applied")
	assert.EqualValues(t, 2, asked.Load(), "asked once per batch of three")
	cp, err := checkpoint.Read(ctx, pool, "seen")
	require.NoError(t, err)
	assert.EqualValues(t, 6, cp.EventsApplied)
	recs, err := store.ReadAll(ctx, eventlog.Position{}, 100)
	require.NoError(t, err)
	assert.Equal(t, recs[len(recs)-1].Position, cp.Position)

	idle.Store(false)
	appendEvents(t, pool, store, 2, 3)
	run()
	assert.EqualValues(t, 6, applied.Load(), "busy batches are applied")
	assert.EqualValues(t, 3, asked.Load(), "not asked again within IdleRecheck")
	cp, err = checkpoint.Read(ctx, pool, "seen")
	require.NoError(t, err)
	assert.EqualValues(t, 12, cp.EventsApplied)

	// A runner that loaded the checkpoint before another moved it cannot move it idly either: its
	// move is refused when it saves it.
	idle.Store(true)
	stale := newProjection()
	_, err = stale.Load(ctx)
	require.NoError(t, err)
	appendEvents(t, pool, store, 1, 1)
	recs = readAll(t, store)
	p2 := newProjection()
	_, err = p2.Load(ctx)
	require.NoError(t, err)
	require.NoError(t, p2.Apply(ctx, recs[len(recs)-1:]))
	require.NoError(t, p2.CaughtUp(ctx))
	require.NoError(t, stale.Apply(ctx, recs[len(recs)-1:]))
	assert.ErrorIs(t, stale.CaughtUp(ctx), projections.ErrCheckpointMoved)
}

func readAll(t *testing.T, store *postgres.Store) []eventlog.RecordedEvent {
	t.Helper()
	recs, err := store.ReadAll(context.Background(), eventlog.Position{}, 1000)
	require.NoError(t, err)
	return recs
}

// TestIndexedReadSaysWhyItWasNotAnswered: a read of its own runs under IndexedPlanning and hands its
// rows over; one whose statement fails returns the server's error and leaves the pool usable; one
// never sent (its context ended first) says it was not answered, and why.
func TestIndexedReadSaysWhyItWasNotAnswered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := setup(t)
	var seqscan string
	require.NoError(t, checkpoint.IndexedRead(ctx, pool, `SELECT current_setting('enable_seqscan')`, nil, func(rows pgx.Rows) error {
		for rows.Next() {
			if err := rows.Scan(&seqscan); err != nil {
				return err
			}
		}
		return nil
	}))
	assert.Equal(t, "off", seqscan)

	err := checkpoint.IndexedRead(ctx, pool, `SELECT 1/0`, nil, func(rows pgx.Rows) error {
		for rows.Next() {
		}
		return nil
	})
	require.ErrorContains(t, err, "division by zero")
	assert.NotErrorIs(t, err, checkpoint.ErrNotAnswered)
	var one int
	require.NoError(t, pool.QueryRow(ctx, `SELECT 1`).Scan(&one), "the pool works after a failed read")

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	err = checkpoint.IndexedRead(canceled, pool, `SELECT 1`, nil, func(pgx.Rows) error { return nil })
	require.ErrorIs(t, err, checkpoint.ErrNotAnswered)
	require.ErrorIs(t, err, context.Canceled)
}
