package readmodel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/eventlogtest"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
)

// waitReadable waits until ReadAll returns every stored event (see catchUp on why it may lag).
func (e *env) waitReadable(t testing.TB) []eventlog.RecordedEvent {
	t.Helper()
	ctx := context.Background()
	stored := e.stored(t)
	deadline := time.Now().Add(time.Minute)
	for {
		var all []eventlog.RecordedEvent
		for {
			var from eventlog.Position
			if n := len(all); n > 0 {
				from = all[n-1].Position
			}
			page, err := e.store.ReadAll(ctx, from, 10000)
			require.NoError(t, err)
			all = append(all, page...)
			if len(page) < 10000 {
				break
			}
		}
		if int64(len(all)) >= stored {
			return all
		}
		require.True(t, time.Now().Before(deadline), "log stuck at %d of %d events", len(all), stored)
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) count(t testing.TB, table string) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n))
	return n
}

// someBookings records a conflict, a canceled booking with a refused late create, and a payment.
func someBookings(t testing.TB, e *env, prefix string) {
	t.Helper()
	b := func(s string) booking.ID { return booking.ID("calendly-" + prefix + s) }
	e.deliver(t, one(prefix+"1", created(b("a"), at(-9, 0), slot(prefix+"ma", at(9, 0), 60, "host-"+prefix))))
	e.deliver(t, one(prefix+"2", created(b("b"), at(-8, 0), slot(prefix+"mb", at(9, 30), 60, "host-"+prefix))))
	e.deliver(t, one(prefix+"3", created(b("c"), at(-7, 0), slot(prefix+"mc", at(13, 0), 30, "host-"+prefix))))
	e.deliver(t, one(prefix+"4", canceled(b("c"), at(-6, 0), "no longer needed")))
	e.deliver(t, one(prefix+"5", event(b("c"), "created-again", at(-5, 0), booking.Scheduled{Slot: slot(prefix+"mc", at(13, 0), 30, "host-"+prefix)})))
	e.deliver(t, one(prefix+"6", event(booking.ID("stripe-pi_"+prefix), "succeeded", at(-4, 0),
		booking.PaymentSucceeded{Refs: []string{"stripe:pi_" + prefix}, Amount: 1200, Currency: "eur"})))
}

func TestApplyFailureLeavesNothingHalfApplied(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	someBookings(t, e, "f")
	all := e.waitReadable(t)
	injected := errors.New("injected crash after apply")
	readmodel.SetFailAfterApply(e.rm, func() error { return injected })

	_, err := e.rm.Runner(projections.RunnerOptions{}).CatchUp(context.Background())
	require.ErrorIs(t, err, injected)
	for _, table := range []string{"calendar_bookings", "calendar_slots", "payment_streams", "reconciliation_items"} {
		assert.Zero(t, e.count(t, table), "%s after a failed batch", table)
	}
	cp, err := e.rm.Checkpoint(context.Background())
	require.NoError(t, err)
	assert.Equal(t, eventlog.Position{}, cp.Position, "checkpoint rolled back with the batch")
	assert.Zero(t, cp.EventsApplied)

	readmodel.SetFailAfterApply(e.rm, nil)
	e.catchUp(t)
	cp, err = e.rm.Checkpoint(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(len(all)), cp.EventsApplied, "every event applied exactly once")
	assert.Equal(t, all[len(all)-1].Position, cp.Position)
	assert.Equal(t, 3, e.count(t, "calendar_bookings"))
	assert.Equal(t, 1, e.count(t, "payment_streams"))
	assert.Len(t, e.openItems(t), 2, "one conflict, one refused late create")
}

func TestStaleRunnerCannotCommitOverAnother(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	someBookings(t, e, "s")
	all := e.waitReadable(t)
	ctx := context.Background()
	// Two processes both believe they lead (the first lost its lock but has not noticed yet).
	other := readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{})
	_, err := e.rm.Load(ctx)
	require.NoError(t, err)
	_, err = other.Load(ctx)
	require.NoError(t, err)

	require.NoError(t, other.Apply(ctx, all))
	before := rowVersions(t, e)
	err = e.rm.Apply(ctx, all[:2])
	require.ErrorIs(t, err, projections.ErrCheckpointMoved)
	// The stale batch's writes and COMMIT went in the compare-and-set's round trip: the refusal
	// stopped them on the server, so no row was even rewritten with the same values.
	assert.Equal(t, before, rowVersions(t, e), "rows written by the stale runner")

	cp, err := e.rm.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(len(all)), cp.EventsApplied)
	assert.Len(t, e.openItems(t), 2)
}

// rowVersions returns every calendar row's table, key and xmin: a row written again, even with the
// same values, changes its xmin.
func rowVersions(t testing.TB, e *env) []string {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT 'b ' || booking || ' ' || xmin::text FROM calendar_bookings
UNION ALL SELECT 's ' || booking || ' ' || resource || ' ' || xmin::text FROM calendar_slots
UNION ALL SELECT 'p ' || stream || ' ' || xmin::text FROM payment_streams
UNION ALL SELECT 'i ' || id::text || ' ' || xmin::text FROM reconciliation_items ORDER BY 1`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, out)
	return out
}

// A batch whose COMMIT fails on the server (here a deferred constraint trigger; in production a
// deferred check or a connection lost at the commit) stores nothing, leaves its connection usable, and
// is applied whole by the next attempt.
func TestCommitFailureLeavesNothingHalfApplied(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	someBookings(t, e, "k")
	all := e.waitReadable(t)
	ctx := context.Background()
	dropTrigger := func() {
		_, err := e.pool.Exec(context.Background(), `DROP TRIGGER IF EXISTS refuse_at_commit ON calendar_bookings;
DROP FUNCTION IF EXISTS refuse_at_commit()`)
		require.NoError(t, err)
	}
	t.Cleanup(dropTrigger) // the database goes back to the spares
	_, err := e.pool.Exec(ctx, `CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'refused at commit'; END $$;
CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER INSERT OR UPDATE ON calendar_bookings
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_at_commit()`)
	require.NoError(t, err)

	// Apply, the live path (a catch-up from the start of the log replays in bulk instead).
	_, err = e.rm.Load(ctx)
	require.NoError(t, err)
	err = e.rm.Apply(ctx, all)
	require.Error(t, err)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	assert.Equal(t, "refused at commit", pgErr.Message)
	assert.Contains(t, err.Error(), "commit the batch")
	for _, table := range []string{"calendar_bookings", "calendar_slots", "payment_streams", "reconciliation_items"} {
		assert.Zero(t, e.count(t, table), "%s after a failed commit", table)
	}
	cp, err := e.rm.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, eventlog.Position{}, cp.Position, "checkpoint rolled back with the batch")

	// Every connection of the pool is out of any transaction: a batch that failed gave its back clean
	// or had it closed.
	stat := e.pool.Stat()
	conns := make([]*pgxpool.Conn, 0, stat.TotalConns())
	for range stat.IdleConns() {
		c, err := e.pool.Acquire(ctx)
		require.NoError(t, err)
		conns = append(conns, c)
		assert.Equal(t, byte('I'), c.Conn().PgConn().TxStatus())
	}
	for _, c := range conns {
		c.Release()
	}

	dropTrigger()
	e.catchUp(t)
	cp, err = e.rm.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(len(all)), cp.EventsApplied, "every event applied exactly once")
	assert.Equal(t, 3, e.count(t, "calendar_bookings"))
	assert.Len(t, e.openItems(t), 2, "one conflict, one refused late create")
}

func TestRestartResumesWithoutDoubleEffects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	someBookings(t, e, "r")
	e.catchUp(t)
	itemsBefore := e.count(t, "reconciliation_items")

	// More deliveries, some of them redeliveries; then a new process (fresh in-memory state) resumes.
	someBookings(t, e, "r")
	e.deliver(t, one("r-more", canceled("calendly-ra", at(-1, 0), "host unavailable")))
	e.rm = readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{})
	e.catchUp(t)

	all := e.waitReadable(t)
	cp, err := e.rm.Checkpoint(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(len(all)), cp.EventsApplied)
	assert.Equal(t, calendar.StatusActive, e.booking(t, "calendly-rb").Status, "the holder was canceled: the other takes the slot")
	assert.Equal(t, itemsBefore, e.count(t, "reconciliation_items"), "no item opened twice")
	assert.Len(t, e.openItems(t), 1, "the conflict closed, the refused create stays")

	// Resuming once more with nothing new changes nothing.
	before := snapshotOf(t, e)
	e.rm = readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{})
	e.catchUp(t)
	assert.Equal(t, before, snapshotOf(t, e))
}

func TestRunnerFollowsNewEvents(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"subscribe", "poll"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel() // on a database of its own
			e := newEnv(t)
			opts := projections.RunnerOptions{PollInterval: 20 * time.Millisecond}
			if mode == "subscribe" {
				opts.Subscriber = e.store
			}
			rm := readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			runner := rm.Runner(opts)
			go func() { done <- runner.Run(ctx) }()

			for i := range 5 {
				id := booking.ID(fmt.Sprintf("calendly-live%d", i))
				e.deliver(t, one(string(id), created(id, at(-5, i), slot("live", at(9, 0), 30, "host-live"))))
				require.Eventually(t, func() bool {
					_, err := rm.Booking(context.Background(), id)
					return err == nil
				}, time.Minute, 5*time.Millisecond, "booking %s never appeared", id)
			}
			assert.True(t, runner.Status().Active)
			cancel()
			assert.ErrorIs(t, <-done, context.Canceled)
			cp, err := rm.Checkpoint(context.Background())
			require.NoError(t, err)
			assert.Equal(t, int64(5), cp.EventsApplied)
		})
	}
}

// Two `serve` processes: each has its own pool, event-store client and read model on one database.
func TestTwoRunnersElectOneActive(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabaseURL(t)
	be := newBackend(t, eventlogtest.SelectedStore(t))
	type proc struct {
		rm     *readmodel.ReadModel
		runner *projections.Runner
	}
	newProc := func() proc {
		pool := pgtest.Open(t, url)
		store, _ := be.open(t, pool)
		rm := readmodel.New(pool, store, eventcodec.JSON{}, readmodel.Options{})
		return proc{rm: rm, runner: rm.Runner(projections.RunnerOptions{Subscriber: store,
			StandbyInterval: 10 * time.Millisecond, RetryInterval: 10 * time.Millisecond, PollInterval: 20 * time.Millisecond})}
	}
	a, b := newProc(), newProc()
	admin := pgtest.Open(t, url)
	e := &env{pool: admin, backend: be, receive: day}
	var ls ledger.Store
	e.store, ls = be.open(t, admin)
	e.ledger = ledger.NewService(ls, eventcodec.JSON{})
	e.rm = a.rm

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, p := range []proc{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.runner.Run(ctx)
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })

	holdersOfLock := func() []int {
		rows, err := admin.Query(context.Background(), `SELECT pid FROM pg_locks
WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((classid::bigint << 32) | objid::bigint) = $1`, checkpoint.LockKey(readmodel.ProjectionName))
		require.NoError(t, err)
		var pids []int
		for rows.Next() {
			var pid int
			require.NoError(t, rows.Scan(&pid))
			pids = append(pids, pid)
		}
		require.NoError(t, rows.Err())
		return pids
	}

	// Deliveries and observations interleave; at no sample may both be active or the lock be held twice.
	for i := range 20 {
		id := booking.ID(fmt.Sprintf("calendly-two%d", i))
		e.deliver(t, one(string(id), created(id, at(-20, i), slot(fmt.Sprintf("two%d", i%4), at(9, 15*(i%4)), 30, "host-two"))))
		active := 0
		for _, p := range []proc{a, b} {
			if p.runner.Status().Active {
				active++
			}
		}
		assert.LessOrEqual(t, active, 1, "both runners active")
		assert.LessOrEqual(t, len(holdersOfLock()), 1)
	}
	require.Eventually(t, func() bool { return len(holdersOfLock()) == 1 }, time.Minute, 10*time.Millisecond)
	waitApplied(t, e)

	// The active runner's lock session dies: a runner takes over (possibly the same process, after
	// it noticed), and the events that arrive meanwhile are applied exactly once.
	pid := holdersOfLock()[0]
	_, err := admin.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid)
	require.NoError(t, err)
	for i := 20; i < 30; i++ {
		id := booking.ID(fmt.Sprintf("calendly-two%d", i))
		e.deliver(t, one(string(id), created(id, at(-20, i), slot(fmt.Sprintf("two%d", i%4), at(9, 15*(i%4)), 30, "host-two"))))
	}
	require.Eventually(t, func() bool {
		pids := holdersOfLock()
		return len(pids) == 1 && pids[0] != pid
	}, time.Minute, 10*time.Millisecond, "nobody took the lock over")
	waitApplied(t, e)
	require.Eventually(t, func() bool {
		active := 0
		for _, p := range []proc{a, b} {
			if p.runner.Status().Active {
				active++
			}
		}
		return active == 1
	}, time.Minute, 10*time.Millisecond)

	// The read model equals a rebuild: nothing was applied twice or skipped.
	cancel()
	wg.Wait()
	before := snapshotOf(t, e)
	require.NoError(t, a.rm.Rebuild(context.Background(), nil))
	assert.Equal(t, before, snapshotOf(t, e))
}

// waitApplied waits until the checkpoint counts every stored event, then checks it counts no more.
func waitApplied(t testing.TB, e *env) {
	t.Helper()
	ctx := context.Background()
	stored := e.stored(t)
	require.Eventually(t, func() bool {
		cp, err := e.rm.Checkpoint(ctx)
		require.NoError(t, err)
		return cp.EventsApplied >= stored
	}, time.Minute, 10*time.Millisecond)
	cp, err := e.rm.Checkpoint(ctx)
	require.NoError(t, err)
	assert.Equal(t, stored, cp.EventsApplied, "events applied more than once")
}

// A batch committed asynchronously (ADR 0019) can be lost in a crash of the database while the
// process lives on: the read model and its checkpoint go back together to an earlier batch. The
// runner's next batch then finds the checkpoint behind where it left it, and the runner applies the
// lost events again. Here the database "forgets" the later batches by restoring the projection's
// tables and checkpoint as they were before them.
func TestBatchesTheDatabaseLostAreAppliedAgain(t *testing.T) {
	t.Parallel()
	readmodel.PostgresOnly(t)
	e := newEnvOn(t, eventlogtest.StorePostgres)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	runner := e.rm.Runner(projections.RunnerOptions{Subscriber: e.store, RetryInterval: 10 * time.Millisecond})
	go func() { done <- runner.Run(ctx) }()
	visible := func(id booking.ID) {
		require.Eventually(t, func() bool {
			_, err := e.rm.Booking(context.Background(), id)
			return err == nil
		}, time.Minute, 5*time.Millisecond, "booking %s never appeared", id)
	}
	someBookings(t, e, "x")
	visible("calendly-xc")
	require.Eventually(t, func() bool { return e.count(t, "payment_streams") == 1 }, time.Minute, 5*time.Millisecond)
	tables := []string{"calendar_bookings", "calendar_slots", "calendar_booking_refs", "payment_streams", "payment_stream_refs",
		"reconciliation_items", "calendar_resources", "calendar_resource_links", "projection_checkpoints"}
	for _, table := range tables {
		_, err := e.pool.Exec(context.Background(), `CREATE TABLE saved_`+table+` AS TABLE `+table)
		require.NoError(t, err)
	}
	someBookings(t, e, "y")
	visible("calendly-yc")
	// The loss is simulated once the runner has applied every "y" event: a batch still in flight
	// holds row locks that TRUNCATE's ACCESS EXCLUSIVE locks, taken table by table, can deadlock with
	// (CI saw 40P01 here when the payment event's batch was still running).
	waitApplied(t, e)

	lose := func() error {
		return pgx.BeginFunc(context.Background(), e.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(context.Background(), `TRUNCATE `+strings.Join(tables, ", ")); err != nil {
				return err
			}
			for _, table := range tables {
				if _, err := tx.Exec(context.Background(), `INSERT INTO `+table+` OVERRIDING SYSTEM VALUE SELECT * FROM saved_`+table); err != nil {
					return err
				}
			}
			return nil
		})
	}
	// A deadlock rolls the simulated loss back whole, so trying it again is the same loss.
	err := lose()
	for attempt := 0; attempt < 10; attempt++ {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "40P01" {
			break
		}
		err = lose()
	}
	require.NoError(t, err)
	_, err = e.rm.Booking(context.Background(), "calendly-yc")
	require.ErrorIs(t, err, projections.ErrNotFound, "the database lost the later batches")

	someBookings(t, e, "z")
	visible("calendly-ya")
	stored := e.stored(t)
	require.Eventually(t, func() bool {
		cp, err := e.rm.Checkpoint(context.Background())
		return err == nil && cp.EventsApplied >= stored
	}, time.Minute, 5*time.Millisecond, "the projection never caught up after the loss")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	cp, err := e.rm.Checkpoint(context.Background())
	require.NoError(t, err)
	assert.Equal(t, stored, cp.EventsApplied, "every event applied once after the loss")
	incremental := snapshotOf(t, e)
	require.NoError(t, e.rm.Rebuild(context.Background(), nil))
	assert.Equal(t, incremental, snapshotOf(t, e), "the recovered read model equals a rebuild")
}
