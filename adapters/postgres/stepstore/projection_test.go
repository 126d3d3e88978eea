package stepstore

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/domain/booking"
	"bookingledger/projections"
)

// gateReads counts the process projection's reads of the calendar's checkpoint.
type gateReads struct{ n atomic.Int32 }

func (g *gateReads) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "FROM projection_checkpoints") && len(d.Args) > 0 && d.Args[0] == readmodel.ProjectionName {
		g.n.Add(1)
	}
	return ctx
}

func (g *gateReads) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// gatedRunner runs the process projection configured as cfg (its pool, calendar reader and client
// filled in) over w's database, on a pool of its own whose reads of the calendar's checkpoint gate
// counts.
func gatedRunner(t *testing.T, w *planWorld, cfg ProjectionConfig) (*projections.Runner, *gateReads) {
	t.Helper()
	gate := &gateReads{}
	pc := w.pool.Config()
	pc.ConnConfig.Tracer = gate
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	cfg.Pool, cfg.Calendar = pool, readmodel.NewStepReader(pool)
	cfg.Client, err = InsertOnlyClient(pool)
	require.NoError(t, err)
	proj, err := NewProjection(cfg)
	require.NoError(t, err)
	return projections.NewRunner(postgres.NewStore(pool), proj, checkpoint.NewLocker(pool), projections.RunnerOptions{}), gate
}

// TestProjectionWaitsWhileTheCalendarRebuilds: while the calendar projection rebuilds, its rows are a
// half-replayed past even where its checkpoint is past the batch (a rebuild that has replayed this
// far but not to the end); the process projection plans nothing from them and keeps waiting. Once
// the rebuild is over it plans the batch.
func TestProjectionWaitsWhileTheCalendarRebuilds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPlanWorld(t)
	w.record(t, planEvent("calendly-r1", "created", t1.Add(-72*time.Hour), booking.Scheduled{Slot: slotAt(t1, "m-r1", "https://api.calendly.com/users/HOST-R"), Capacity: 1}))
	w.catchUp(t, w.calendar, readmodel.ProjectionName)
	_, err := w.pool.Exec(ctx, `UPDATE projection_checkpoints SET rebuilding = true WHERE name = $1`, readmodel.ProjectionName)
	require.NoError(t, err)

	runner, gate := gatedRunner(t, w, ProjectionConfig{Targets: both, GatePoll: time.Millisecond})
	steps := func() int {
		var n int
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM process_steps`).Scan(&n))
		return n
	}

	waiting, stop := context.WithCancel(ctx)
	defer stop()
	returned := make(chan error, 1)
	go func() { _, err := runner.CatchUp(waiting); returned <- err }()
	for gate.n.Load() < 3 {
		select {
		case err := <-returned:
			t.Fatalf("the projection applied the batch while the calendar was rebuilding (err %v, %d steps planned)", err, steps())
		case <-time.After(time.Millisecond):
		}
	}
	require.Zero(t, steps(), "nothing planned from a rebuilding calendar")
	stop()
	require.ErrorIs(t, <-returned, context.Canceled)
	require.Zero(t, steps())

	_, err = w.pool.Exec(ctx, `UPDATE projection_checkpoints SET rebuilding = false WHERE name = $1`, readmodel.ProjectionName)
	require.NoError(t, err)
	w.catchUp(t, runner, ProjectionName)
	require.Equal(t, 2, steps(), "the rebuilt calendar's booking gets its steps")
}

// TestProjectionWithoutTargetsOnlyMovesItsCheckpoint: with no target configured there is nothing to
// plan, so a batch neither waits for the calendar (here it is rebuilding, which would hold a batch
// with targets) nor opens a transaction: its checkpoint moves past every event, and no step exists.
func TestProjectionWithoutTargetsOnlyMovesItsCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPlanWorld(t)
	w.record(t, planEvent("calendly-n1", "created", t1.Add(-72*time.Hour), booking.Scheduled{Slot: slotAt(t1, "m-n1", "https://api.calendly.com/users/HOST-N"), Capacity: 1}))
	_, err := w.pool.Exec(ctx, `INSERT INTO projection_checkpoints (name, rebuilding) VALUES ($1, true)
ON CONFLICT (name) DO UPDATE SET rebuilding = true`, readmodel.ProjectionName)
	require.NoError(t, err)

	runner, gate := gatedRunner(t, w, ProjectionConfig{GatePoll: time.Millisecond})
	done, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for { // the event may be held back a moment by other tests' transactions (ReadAll's rule)
		_, err := runner.CatchUp(done)
		require.NoError(t, err, "a batch with nothing to plan waited for the calendar")
		cp, err := checkpoint.Read(ctx, w.pool, ProjectionName)
		require.NoError(t, err)
		if cp.EventsApplied == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	require.Zero(t, gate.n.Load(), "the calendar's checkpoint was read")
	var steps int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM process_steps`).Scan(&steps))
	require.Zero(t, steps)
}

// TestProjectionWakesWhenTheCalendarAdvances: a batch that waits for the calendar looks again as soon
// as the calendar of its process says it committed (CalendarAdvanced), not at its next poll: here the
// batch has looked ten times (polls 5 ms apart, doubling), so its next poll is 2.56 s away.
func TestProjectionWakesWhenTheCalendarAdvances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPlanWorld(t)
	w.record(t, planEvent("calendly-w1", "created", t1.Add(-72*time.Hour), booking.Scheduled{Slot: slotAt(t1, "m-w1", "https://api.calendly.com/users/HOST-W"), Capacity: 1}))
	var (
		mu       sync.Mutex
		advanced = make(chan struct{})
	)
	runner, gate := gatedRunner(t, w, ProjectionConfig{Targets: both, GatePoll: 10 * time.Second, CalendarAdvanced: func() <-chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		return advanced
	}})
	returned := make(chan error, 1)
	go func() {
		for { // the event may be held back a moment by other tests' transactions (ReadAll's rule)
			if _, err := runner.CatchUp(ctx); err != nil {
				returned <- err
				return
			}
			cp, err := checkpoint.Read(ctx, w.pool, ProjectionName)
			if err != nil || cp.EventsApplied == 1 {
				returned <- err
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	require.Eventually(t, func() bool { return gate.n.Load() >= 10 }, 30*time.Second, time.Millisecond, "the batch never waited for the calendar")
	select {
	case err := <-returned:
		t.Fatalf("the batch did not wait for the calendar (err %v)", err)
	default:
	}
	w.catchUp(t, w.calendar, readmodel.ProjectionName)
	mu.Lock()
	close(advanced)
	advanced = make(chan struct{})
	mu.Unlock()
	select {
	case err := <-returned:
		require.NoError(t, err)
	case <-time.After(1500 * time.Millisecond):
		t.Fatal("the batch did not look again when the calendar advanced")
	}
	var steps int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM process_steps`).Scan(&steps))
	require.Equal(t, 2, steps, "the booking's steps, planned from the calendar's row")
}
