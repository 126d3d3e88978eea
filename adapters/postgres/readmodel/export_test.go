package readmodel

import (
	"context"
	"testing"

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

// Checkpoint returns the calendar projection's saved checkpoint (zero when it never ran).
func (m *ReadModel) Checkpoint(ctx context.Context) (checkpoint.Checkpoint, error) {
	return checkpoint.Read(ctx, m.pool, ProjectionName)
}

// Rebuild empties the calendar read model and replays the whole log as `bookingledger rebuild` does,
// calling progress after every batch (it may be nil).
func (m *ReadModel) Rebuild(ctx context.Context, progress func(projections.Progress)) error {
	return m.Runner(projections.RunnerOptions{BatchSize: RebuildBatchSize}).Rebuild(ctx, progress)
}

// Bookings returns every calendar row, ordered by booking id: tests compare read models with it.
func (m *ReadModel) Bookings(ctx context.Context) ([]calendar.Booking, error) {
	return queryRows(ctx, m.pool, scanBooking, `SELECT `+bookingColumns+` FROM calendar_bookings ORDER BY booking`)
}

// SetFailAfterApply makes every Apply fail after all its writes, before the commit.
func SetFailAfterApply(m *ReadModel, f func() error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failAfterApply = f
}

// RequireIndexedGenericPlans fails t for every statement of sent whose generic plan, over a calendar
// of a few thousand rows or over the empty tables of a fresh database (where a connection's first
// batch plans them, and the plan then serves it while the tables grow), reads one of its growing
// tables without an index condition.
func RequireIndexedGenericPlans(t *testing.T, sent []plantest.Statement) {
	t.Helper()
	for _, db := range []struct{ name, url string }{{"filled", filledCalendar(t)}, {"empty", pgtest.NewDatabaseURL(t)}} {
		conn := plantest.Connect(t, db.url, batchPlanning...)
		for _, s := range sent {
			growing.Check(t, conn, db.name+" database", s, plantest.Kept)
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
