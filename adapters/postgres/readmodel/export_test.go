package readmodel

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/eventlogtest"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/pgtest/plantest"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
)

// Runner returns a runner of the calendar projection over the read model's event store, elected by
// its advisory lock, loading replays from the start of the log in bulk, as serve runs it.
func (m *ReadModel) Runner(opts projections.RunnerOptions) *projections.Runner {
	opts.Bulk = m
	return projections.NewRunner(m.events, m, checkpoint.NewLocker(m.pool), opts)
}

// Pass returns a runner like Runner's for one pass (CatchUp or Rebuild): the same advisory lock, on a
// pool connection that goes back to the pool once unlocked. checkpoint.Locker closes the lock's
// session after every hold, as a serve process does at most a few times; a test's pass after every
// few deliveries paid a new server backend each time (about half the connections of the package).
// Runners that follow the log (Run) and the lock tests keep Runner.
func (m *ReadModel) Pass(opts projections.RunnerOptions) *projections.Runner {
	opts.Bulk = m
	return projections.NewRunner(m.events, m, poolLocker{m.pool}, opts)
}

// poolLocker is checkpoint.Locker without the dedicated session: see Pass.
type poolLocker struct{ pool *pgxpool.Pool }

func (l poolLocker) TryAcquire(ctx context.Context, name string) (projections.Lease, error) {
	key := checkpoint.LockKey(name)
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil {
		conn.Release()
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if !ok {
		conn.Release()
		return nil, nil
	}
	return &poolLease{conn: conn, key: key, lost: make(chan struct{})}, nil
}

type poolLease struct {
	conn *pgxpool.Conn
	key  int64
	lost chan struct{}
	once sync.Once
}

func (le *poolLease) Lost() <-chan struct{} { return le.lost }

func (le *poolLease) Release(ctx context.Context) {
	le.once.Do(func() {
		defer close(le.lost)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		var unlocked bool
		if err := le.conn.QueryRow(ctx, `SELECT pg_advisory_unlock($1)`, le.key).Scan(&unlocked); err != nil || !unlocked {
			// The session may still hold the lock: it must not serve anything else.
			_ = le.conn.Hijack().Close(ctx)
			return
		}
		le.conn.Release()
	})
}

// Checkpoint returns the calendar projection's saved checkpoint (zero when it never ran).
func (m *ReadModel) Checkpoint(ctx context.Context) (checkpoint.Checkpoint, error) {
	return checkpoint.Read(ctx, m.pool, ProjectionName)
}

// Rebuild empties the calendar read model and replays the whole log as `bookingledger rebuild` does,
// calling progress after every batch (it may be nil).
func (m *ReadModel) Rebuild(ctx context.Context, progress func(projections.Progress)) error {
	return m.Pass(projections.RunnerOptions{BatchSize: RebuildBatchSize}).Rebuild(ctx, progress)
}

// Bookings returns every calendar row, ordered by booking id: tests compare read models with it.
func (m *ReadModel) Bookings(ctx context.Context) ([]calendar.Booking, error) {
	return queryRows(ctx, m.pool, scanBooking, `SELECT `+bookingColumns+` FROM calendar_bookings ORDER BY booking`)
}

// SetFailAfterApply makes every bulk replay (a catch-up from far behind, a rebuild) fail after all its
// writes, before the commit.
func SetFailAfterApply(m *ReadModel, f func() error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failAfterApply = f
}

// PlanDatabase is a database, by name, whose state RequireIndexedGenericPlans plans in.
type PlanDatabase struct{ Name, URL string }

// RequireIndexedGenericPlans fails t for every statement of sent whose generic plan, over a calendar
// of a few thousand rows, over the empty tables of a fresh database or in more (where a connection's
// first batch plans them, and the plan then serves it while the tables grow), reads one of its
// growing tables without an index condition.
func RequireIndexedGenericPlans(t *testing.T, sent []plantest.Statement, more ...PlanDatabase) {
	t.Helper()
	dbs := append([]PlanDatabase{{"filled", filledCalendar(t)}, {"empty", pgtest.NewDatabaseURL(t)}}, more...)
	for _, db := range dbs {
		conn := plantest.Connect(t, db.URL, batchPlanning...)
		for _, s := range sent {
			growing.Check(t, conn, db.Name+" database", s, plantest.Kept)
		}
	}
}

// PostgresOnly skips, in the EventStoreDB pass, a test that runs on PostgreSQL whichever store is
// selected (its events in PostgreSQL, or no event store at all): the PostgreSQL pass runs it already,
// and the EventStoreDB pass would only run the same test again.
func PostgresOnly(t *testing.T) {
	t.Helper()
	if eventlogtest.SelectedStore(t) != eventlogtest.StorePostgres {
		t.Skip("runs on PostgreSQL whichever store is selected: the PostgreSQL pass runs it")
	}
}

// SetGuardHorizon makes m's bulk replays load the claims whose slot ended before at unguarded, and
// compute the lone bookings among them in the fold (lone.go), instead of a day before the database's
// now().
func SetGuardHorizon(m *ReadModel, at time.Time) { m.horizon = at }

// Chunked returns how many bookings m's last bulk replay left to its chunks: those that are not lone.
func Chunked(m *ReadModel) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.chunked
}

// Undone returns how many of the bookings m's last bulk replay left to its chunks its fold had computed
// as lone ones, and the walk undid.
func Undone(m *ReadModel) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.undone
}

// SetReplayBatch makes m's bulk replays decode (and compute lone bookings) about n events at once.
func SetReplayBatch(m *ReadModel, n int) { m.replayBatch = n }
