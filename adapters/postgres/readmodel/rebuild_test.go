package readmodel_test

import (
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/eventlogtest"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
)

func TestRebuildEqualsIncremental(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(42, 42))
	for _, d := range arrival(r, genScenario(42)) {
		e.deliver(t, d)
		e.catchUp(t) // incremental: one delivery at a time
	}
	// An operator decision is not in the log: a rebuild must keep it.
	open := e.openItems(t)
	require.NotEmpty(t, open)
	resolved, err := e.rm.Resolve(ctx, open[0].ID, "accepted by the host", "tester")
	require.NoError(t, err)
	incremental := snapshotOf(t, e)
	itemsBefore := e.count(t, "reconciliation_items")
	all := e.waitReadable(t)

	var calls []projections.Progress
	// A new process rebuilds: nothing carried over in memory.
	rm := readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{})
	require.NoError(t, rm.Rebuild(ctx, func(p projections.Progress) { calls = append(calls, p) }))

	assert.Equal(t, incremental, snapshotOf(t, e), "rebuilt rows differ from incremental ones")
	assert.Equal(t, itemsBefore, e.count(t, "reconciliation_items"), "the rebuild opened or duplicated items")
	items, err := e.rm.Items(ctx, resolved.Booking)
	require.NoError(t, err)
	for _, it := range items {
		if it.ID == resolved.ID {
			assert.Equal(t, calendar.ClosedByOperator, it.ClosedBy)
			assert.Equal(t, "accepted by the host", it.Note)
		}
	}

	require.NotEmpty(t, calls)
	assert.Equal(t, projections.Progress{Total: int64(len(all))}, calls[0], "first call announces the total")
	last := calls[len(calls)-1]
	assert.Equal(t, int64(len(all)), last.Done)
	assert.Equal(t, int64(len(all)), last.Total)
	for i := 1; i < len(calls); i++ {
		assert.Greater(t, calls[i].Done, calls[i-1].Done, "progress moves forward")
	}
	cp, err := rm.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(len(all)), cp.EventsApplied)
	assert.False(t, cp.Rebuilding)

	// Again as serve rebuilds on PostgreSQL: the replay reads the store's events where they lie
	// (Options.Log), the runner reads none of them and nothing copies them into the replay's table.
	log := e.log()
	if log == nil {
		return
	}
	counted := &readCounter{Store: e.store}
	replayRows := int64(-1)
	inPlace := readmodel.New(e.pool, counted, eventcodec.JSON{}, readmodel.Options{Log: log, Phases: func(phase string, _ time.Duration) {
		if phase == "fold" {
			var table string
			require.NoError(t, e.pool.QueryRow(ctx, `SELECT relname FROM pg_class WHERE relname LIKE 'calendar\_replay\_rebuild\_%'`).Scan(&table))
			require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&replayRows))
		}
	}})
	calls = nil
	require.NoError(t, inPlace.Rebuild(ctx, func(p projections.Progress) { calls = append(calls, p) }))
	assert.Equal(t, incremental, snapshotOf(t, e), "rows rebuilt from the log read in place differ from incremental ones")
	assert.Zero(t, replayRows, "the replay's table holds none of the log's events")
	assert.Equal(t, itemsBefore, e.count(t, "reconciliation_items"))
	assert.EqualValues(t, 1, counted.reads.Load(), "ReadAll calls: the progress's count only")
	assert.Equal(t, int64(len(all)), calls[len(calls)-1].Done)
	cp, err = inPlace.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(len(all)), cp.EventsApplied)
	assert.Equal(t, all[len(all)-1].Position, cp.Position)
}

// readCounter counts the ReadAll calls of the store it wraps.
type readCounter struct {
	eventlog.Store
	reads atomic.Int64
}

func (c *readCounter) ReadAll(ctx context.Context, from eventlog.Position, limit int) ([]eventlog.RecordedEvent, error) {
	c.reads.Add(1)
	return c.Store.ReadAll(ctx, from, limit)
}

func TestRebuildRefusedWhileAnotherProcessRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	lease, err := checkpoint.NewLocker(e.pool).TryAcquire(ctx, readmodel.ProjectionName)
	require.NoError(t, err)
	require.NotNil(t, lease)
	defer lease.Release(ctx)

	err = e.rm.Rebuild(ctx, nil)
	assert.ErrorIs(t, err, projections.ErrBusy)
	_, err = e.rm.Runner(projections.RunnerOptions{}).CatchUp(ctx)
	assert.ErrorIs(t, err, projections.ErrBusy)
}

// A rebuild stores the replayed events and writes the calendar at the end: an interrupted rebuild
// has written nothing, and the next runner replays from the start.
func TestInterruptedRebuildIsFinishedByTheNextRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for _, d := range genScenario(7) {
		e.deliver(t, d)
	}
	e.catchUp(t)
	want := snapshotOf(t, e)

	dying := readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{})
	require.NoError(t, dying.Reset(ctx))
	all := e.waitReadable(t)
	_, err := dying.Load(ctx)
	require.NoError(t, err)
	require.NoError(t, dying.Buffer(ctx, all[:len(all)/2]))
	// then the process dies
	cp, err := dying.Checkpoint(ctx)
	require.NoError(t, err)
	require.True(t, cp.Rebuilding)
	assert.Zero(t, cp.EventsApplied, "nothing written before the end of the replay")
	assert.Zero(t, e.count(t, "calendar_bookings"))

	e.rm = readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{})
	e.catchUp(t)
	assert.Equal(t, want, snapshotOf(t, e))
	cp, err = e.rm.Checkpoint(ctx)
	require.NoError(t, err)
	assert.False(t, cp.Rebuilding)
	assert.Equal(t, int64(len(all)), cp.EventsApplied)
}

// A booking rescheduled to one in another chunk, whose own cancel has not arrived, is released by
// the new booking's create: the chunk that computes the old booking must know of the new one (the
// bookings rescheduled from it, which chunkSQL reads with its key).
func TestRebuildReleasesASlotRescheduledIntoAnotherChunk(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.deliver(t, one("old", created("calendly-old", at(-3, 0), slot("ev-old", at(9, 0), 30, "host-a"))))
	e.deliver(t, one("new", event("calendly-new", "created", at(-2, 0),
		booking.Scheduled{Slot: slot("ev-new", at(11, 0), 30, "host-b"), Capacity: 1, RescheduledFrom: "calendly-old"})))
	e.catchUp(t)
	want := snapshotOf(t, e)
	require.Len(t, want.Bookings, 2)
	require.Equal(t, calendar.StatusCanceled, want.Bookings[1].Status, "calendly-old")
	require.True(t, want.Bookings[1].CancelImplied)
	e.waitReadable(t)
	e.rm = readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{RebuildChunk: 1})
	require.NoError(t, e.rm.Rebuild(ctx, nil))
	assert.Equal(t, want, snapshotOf(t, e))
}

// The open items of bookings the log no longer holds (an event store restored from a backup older
// than the read model's) are closed by a rebuild: the rebuilt calendar has no row to call for them.
func TestRebuildClosesItemsOfBookingsTheLogNoLongerHolds(t *testing.T) {
	t.Parallel()
	readmodel.PostgresOnly(t)
	e := newEnvOn(t, eventlogtest.StorePostgres) // the log loses its events by a DELETE on its table
	ctx := context.Background()
	e.deliver(t, one("holder", created("calendly-holder", at(-3, 0), slot("ev-1", at(9, 0), 60, "host-a"))))
	e.deliver(t, one("loser", created("calendly-loser", at(-2, 0), slot("ev-2", at(9, 30), 60, "host-a"))))
	e.catchUp(t)
	require.Len(t, e.openItems(t), 1)
	_, err := e.pool.Exec(ctx, `DELETE FROM events WHERE stream_id = ANY($1)`,
		[]string{booking.StreamPrefix + "calendly-holder", booking.StreamPrefix + "calendly-loser"})
	require.NoError(t, err)
	e.waitReadable(t)
	require.NoError(t, e.rm.Rebuild(ctx, nil))
	assert.Zero(t, e.count(t, "calendar_bookings"))
	assert.Empty(t, e.openItems(t))
	var closedBy string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT closed_by FROM reconciliation_items WHERE booking = 'calendly-loser'`).Scan(&closedBy))
	assert.Equal(t, "auto", closedBy)
}
