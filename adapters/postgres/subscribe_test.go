package postgres_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/domain/eventlog"
)

type subscription struct {
	events chan eventlog.RecordedEvent
	done   chan error
	cancel context.CancelFunc
}

func subscribe(t *testing.T, s *postgres.Store, from eventlog.Position, handle func(eventlog.RecordedEvent) error) *subscription {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	sub := &subscription{events: make(chan eventlog.RecordedEvent, 100), done: make(chan error, 1), cancel: cancel}
	go func() {
		sub.done <- s.Subscribe(ctx, from, func(e eventlog.RecordedEvent) error {
			if handle != nil {
				if err := handle(e); err != nil {
					return err
				}
			}
			sub.events <- e
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-sub.done
	})
	return sub
}

func (sub *subscription) next(t *testing.T, within time.Duration) eventlog.RecordedEvent {
	t.Helper()
	select {
	case e := <-sub.events:
		return e
	case err := <-sub.done:
		t.Fatalf("subscription ended: %v", err)
	case <-time.After(within):
		t.Fatalf("no event within %s", within)
	}
	return eventlog.RecordedEvent{}
}

// TestAppendNotifies: both write paths notify bookingledger_events after their commit.
func TestAppendNotifies(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `LISTEN bookingledger_events`)
	require.NoError(t, err)
	defer func() { _, _ = conn.Exec(context.Background(), `UNLISTEN *`) }()

	stream := streamName(t)
	writes := []func() error{
		func() error { _, err := s.Append(ctx, stream, eventlog.NoStream(), events(t, 1)); return err },
		func() error {
			_, err := s.Commit(ctx, commitOf("d-n", appendOf(stream, eventlog.Exact(1), event(t, "x.v1"))))
			return err
		},
	}
	for i, write := range writes {
		require.NoError(t, write())
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := conn.Conn().WaitForNotification(wctx)
		cancel()
		require.NoError(t, err, "write %d sent no notification", i)
		assert.Equal(t, "bookingledger_events", n.Channel)
		time.Sleep(50 * time.Millisecond) // past the notifier's coalescing interval
	}
}

// TestSubscribeWakesOnNotification: with polling and quick re-reads out of the way, a readable event
// is delivered when, and only when, a notification arrives. (TestAppendNotifies shows the store
// sends one after each write; here the test sends it, so that the event is surely readable first.)
func TestSubscribeWakesOnNotification(t *testing.T) {
	t.Parallel()
	pool := spares.Database(t)
	// The subscriber's store has a pool of its own whose statements are watched, to know when its
	// quick re-reads are over.
	var watch statementWatch
	cfg := pool.Config()
	cfg.ConnConfig.Tracer = &watch
	watched, err := pgxpool.NewWithConfig(testCtx(t), cfg)
	require.NoError(t, err)
	t.Cleanup(watched.Close)
	s := postgres.NewStore(watched)
	postgres.SetPollInterval(s, time.Hour)
	postgres.SetReread(s, 10*time.Millisecond, 40*time.Millisecond)
	ctx := testCtx(t)
	stream := streamName(t)

	first := rawAppend(t, pool, stream, 0)
	readAllEventually(t, s, eventlog.Position{}, 1)
	sub := subscribe(t, s, eventlog.Position{}, nil)
	assert.Equal(t, first, sub.next(t, 30*time.Second).ID)
	// Listening, quick re-reads over (they are 70 ms of waits in all): it now waits for a notification.
	// A fixed sleep was not enough on a loaded machine, where the re-reads themselves take long.
	watch.waitQuiet(t, "LISTEN", time.Second)

	second := rawAppend(t, pool, stream, 1)
	readAllEventually(t, s, eventlog.Position{}, 2)
	time.Sleep(200 * time.Millisecond)
	select {
	case e := <-sub.events:
		t.Fatalf("event %s delivered without a notification: polling was not out of the way", e.ID)
	default:
	}
	_, err = pool.Exec(ctx, `SELECT pg_notify('bookingledger_events', '')`)
	require.NoError(t, err)
	assert.Equal(t, second, sub.next(t, 30*time.Second).ID)
}

// statementWatch is a pgx tracer that knows when a pool's connections last ran a statement.
type statementWatch struct {
	mu       sync.Mutex
	running  int
	lastEnd  time.Time
	prefixes []string // of every statement started
	found    int      // SELECTs that returned rows
}

func (w *statementWatch) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running++
	w.prefixes = append(w.prefixes, strings.SplitN(strings.TrimSpace(data.SQL), " ", 2)[0])
	return ctx
}

func (w *statementWatch) TraceQueryEnd(_ context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.running--
	w.lastEnd = time.Now()
	if strings.HasPrefix(data.CommandTag.String(), "SELECT ") && data.CommandTag.RowsAffected() > 0 {
		w.found++
	}
}

// finding is how many SELECTs returned rows.
func (w *statementWatch) finding() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.found
}

// waitQuiet waits until a statement starting with first has run and no statement has run for quiet.
func (w *statementWatch) waitQuiet(t *testing.T, first string, quiet time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return slices.Contains(w.prefixes, first) && w.running == 0 && time.Since(w.lastEnd) > quiet
	}, time.Minute, 10*time.Millisecond, "the subscriber kept reading")
}

// rawAppend calls bl_append directly, as another process might: the store's notifier is not involved.
func rawAppend(t *testing.T, pool *pgxpool.Pool, stream string, version uint64) eventlog.EventID {
	t.Helper()
	e := event(t, "booking.scheduled.v1")
	_, err := pool.Exec(testCtx(t), `SELECT * FROM bl_append($1, 'exact', $2, $3, $4, $5, $6)`,
		stream, int64(version), [][16]byte{e.ID}, []string{e.Type}, [][]byte{e.Data}, [][]byte{e.Metadata})
	require.NoError(t, err)
	return e.ID
}

// TestSubscribeRereadsHeldBackEvents: an event notified while an older transaction is open is not
// readable yet; the subscriber must pick it up after that transaction ends, without a new
// notification and long before the poll interval.
func TestSubscribeRereadsHeldBackEvents(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	postgres.SetPollInterval(s, time.Hour)
	postgres.SetReread(s, 10*time.Millisecond, time.Hour) // keep re-reading, in case other work holds the log back too
	ctx := testCtx(t)
	sub := subscribe(t, s, eventlog.Position{}, nil)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT pg_current_xact_id()`)
	require.NoError(t, err)
	res, err := s.Append(ctx, streamName(t), eventlog.NoStream(), events(t, 1))
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond) // notified, read, found nothing, re-reading
	require.NoError(t, tx.Rollback(ctx))
	assert.Equal(t, res.Position, sub.next(t, 30*time.Second).Position)
}

// TestSubscribePollsWithoutNotification: events written by another process that never notifies (here:
// bl_append called directly) still arrive, by polling.
func TestSubscribePollsWithoutNotification(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	postgres.SetPollInterval(s, 50*time.Millisecond)
	ctx := testCtx(t)
	sub := subscribe(t, s, eventlog.Position{}, nil)
	time.Sleep(100 * time.Millisecond)

	e := event(t, "booking.scheduled.v1")
	stream := streamName(t)
	_, err := pool.Exec(ctx, `SELECT * FROM bl_append($1, 'no_stream', 0, $2, $3, $4, $5)`,
		stream, [][16]byte{e.ID}, []string{e.Type}, [][]byte{e.Data}, [][]byte{e.Metadata})
	require.NoError(t, err)
	got := sub.next(t, 30*time.Second)
	assert.Equal(t, e.ID, got.ID)
	assert.Equal(t, stream, got.StreamID)
}

func TestSubscribeFromPositionAndErrors(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := testCtx(t)
	stream := streamName(t)
	_, err := s.Append(ctx, stream, eventlog.NoStream(), events(t, 4))
	require.NoError(t, err)
	recs := readAllEventually(t, s, eventlog.Position{}, 4)
	require.Len(t, recs, 4)

	t.Run("resumes after the given position", func(t *testing.T) {
		sub := subscribe(t, s, recs[1].Position, nil)
		assert.Equal(t, recs[2].ID, sub.next(t, 30*time.Second).ID)
		assert.Equal(t, recs[3].ID, sub.next(t, 30*time.Second).ID)
	})
	t.Run("handler error ends it", func(t *testing.T) {
		boom := errors.New("projection failed")
		sub := subscribe(t, s, eventlog.Position{}, func(e eventlog.RecordedEvent) error {
			if e.Version == 2 {
				return boom
			}
			return nil
		})
		assert.Equal(t, uint64(1), sub.next(t, 30*time.Second).Version)
		select {
		case err := <-sub.done:
			assert.ErrorIs(t, err, boom)
			assert.Contains(t, err.Error(), stream+"@2")
			sub.done <- err // for the cleanup
		case <-time.After(10 * time.Second):
			t.Fatal("Subscribe did not return the handler's error")
		}
	})
	t.Run("context end ends it", func(t *testing.T) {
		sub := subscribe(t, s, eventlog.Position{}, nil)
		for range 4 {
			sub.next(t, 30*time.Second)
		}
		sub.cancel()
		select {
		case err := <-sub.done:
			assert.ErrorIs(t, err, context.Canceled)
			sub.done <- err
		case <-time.After(10 * time.Second):
			t.Fatal("Subscribe did not return after its context ended")
		}
	})
}

// TestSubscribeSurvivesLostListener: the listening connection is killed server-side; the subscription
// keeps delivering (by polling, then by listening again).
func TestSubscribeSurvivesLostListener(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	postgres.SetPollInterval(s, 100*time.Millisecond)
	ctx := testCtx(t)
	stream := streamName(t)
	sub := subscribe(t, s, eventlog.Position{}, nil)
	_, err := s.Append(ctx, stream, eventlog.NoStream(), events(t, 1))
	require.NoError(t, err)
	sub.next(t, 30*time.Second)

	// The first event may arrive by the catch-up read before the subscription has issued LISTEN:
	// wait for the listening connection to exist before killing it.
	const listeners = `FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN%'`
	require.Eventually(t, func() bool { return count(t, pool, `SELECT count(*) `+listeners) == 1 },
		10*time.Second, 10*time.Millisecond, "the subscription never listened")
	killed := count(t, pool, `SELECT count(pg_terminate_backend(pid)) `+listeners)
	require.Equal(t, 1, killed, "the subscription's listening connection")

	for v := uint64(2); v <= 3; v++ {
		_, err = s.Append(ctx, stream, eventlog.Exact(v-1), events(t, 1))
		require.NoError(t, err)
		assert.Equal(t, v, sub.next(t, 30*time.Second).Version)
	}
}

// TestSubscriptionsShareOneReader: subscriptions that have caught up follow the store's one reader of
// the end of the log: three of them listen on one connection, not three, and each still receives
// every event in order.
func TestSubscriptionsShareOneReader(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	stream := streamName(t)
	subs := []*subscription{subscribe(t, s, eventlog.Position{}, nil), subscribe(t, s, eventlog.Position{}, nil),
		subscribe(t, s, eventlog.Position{}, nil)}
	for v := uint64(1); v <= 5; v++ {
		_, err := s.Append(ctx, stream, eventlog.Exact(v-1), events(t, 1))
		require.NoError(t, err)
		for i, sub := range subs {
			assert.Equal(t, v, sub.next(t, 30*time.Second).Version, "subscription %d", i)
		}
	}
	listeners := `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN%'`
	assert.Equal(t, 1, count(t, pool, listeners), "listening connections for three subscriptions")

	// The last subscription to end stops the reader and closes its connection.
	for _, sub := range subs {
		sub.cancel()
		err := <-sub.done
		require.ErrorIs(t, err, context.Canceled)
		sub.done <- err // for the cleanup
	}
	require.Eventually(t, func() bool { return count(t, pool, listeners) == 0 }, 10*time.Second, 10*time.Millisecond,
		"the reader still listens after its last subscription ended")
}

// TestTailPacesItsReadsUnderSteadyWrites: while notified writes keep coming, the shared tail's reads
// find events at most once per pacing interval, each taking what was committed since the last, and
// every event still reaches the subscription once and in order. Without the pacing the tail reads at
// every notification and quick re-read: several times per interval here.
func TestTailPacesItsReadsUnderSteadyWrites(t *testing.T) {
	t.Parallel()
	pool := spares.Database(t)
	// The subscriber's store has a pool of its own whose statements are counted: its reads.
	var watch statementWatch
	cfg := pool.Config()
	cfg.ConnConfig.Tracer = &watch
	watched, err := pgxpool.NewWithConfig(testCtx(t), cfg)
	require.NoError(t, err)
	t.Cleanup(watched.Close)
	s := postgres.NewStore(watched)
	const pacing = 100 * time.Millisecond
	postgres.SetTailPacing(s, pacing)
	// Quick re-reads go on up to the poll interval: other tests' transactions can hold the log's end
	// back for longer than one.
	postgres.SetPollInterval(s, time.Second)
	postgres.SetReread(s, 5*time.Millisecond, time.Second)
	writer := postgres.NewStore(pool) // notifies after its commits, at most every 20 ms
	ctx := testCtx(t)
	stream := streamName(t)

	sub := subscribe(t, s, eventlog.Position{}, nil)
	watch.waitQuiet(t, "LISTEN", 100*time.Millisecond)
	before := watch.finding()
	start := time.Now()
	const n = 90 // fewer than the subscription's buffer holds
	for v := range uint64(n) {
		_, err := writer.Append(ctx, stream, eventlog.Exact(v), events(t, 1))
		require.NoError(t, err)
		time.Sleep(2 * time.Millisecond)
	}
	for v := uint64(1); v <= n; v++ {
		require.Equal(t, v, sub.next(t, 30*time.Second).Version)
	}
	elapsed := time.Since(start)
	reads := watch.finding() - before
	// One read that finds events per interval begun, and the one that took the first event at once.
	// (Reads that find nothing, while what was notified is held back behind another transaction, are
	// not held: they are not counted.)
	assert.LessOrEqual(t, reads, int(elapsed/pacing)+2, "%d reads of the tail found events in %s of writes", reads, elapsed)
	select {
	case e := <-sub.events:
		t.Fatalf("event %s@%d delivered twice or out of nowhere", e.StreamID, e.Version)
	default:
	}
}

// TestSubscriptionsGetTheLogUnderConcurrentWriters: writers append to their streams concurrently while
// subscriptions start from the start of the log and from events written on the way, one of them slow
// enough to fall behind the little the tail keeps here. Each receives exactly what ReadAll from its
// position holds, in that order: the shared tail hands out what a read of one's own would.
func TestSubscriptionsGetTheLogUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	postgres.SetTailKeep(s, 8)
	ctx := testCtx(t)
	const writers, appends = 4, 30

	type started struct {
		from eventlog.Position
		sub  *subscription
	}
	var (
		mu   sync.Mutex
		subs []started
	)
	start := func(from eventlog.Position, slow bool) {
		var handle func(eventlog.RecordedEvent) error
		if slow {
			handle = func(eventlog.RecordedEvent) error { time.Sleep(2 * time.Millisecond); return nil }
		}
		sub := subscribe(t, s, from, handle)
		sub.events = make(chan eventlog.RecordedEvent, writers*appends)
		mu.Lock()
		subs = append(subs, started{from, sub})
		mu.Unlock()
	}
	start(eventlog.Position{}, false)
	start(eventlog.Position{}, true)

	var wg sync.WaitGroup
	for w := range writers {
		stream := streamName(t)
		wg.Go(func() {
			for v := range uint64(appends) {
				res, err := s.Append(ctx, stream, eventlog.Exact(v), events(t, 1))
				if assert.NoError(t, err) && w == 0 && v%10 == 5 {
					start(res.Position, false) // a subscription joins from an event just written
				}
			}
		})
	}
	wg.Wait()
	all := readAllEventually(t, s, eventlog.Position{}, writers*appends)
	require.Len(t, all, writers*appends)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, subs, 5)
	for i, st := range subs {
		want, err := s.ReadAll(ctx, st.from, writers*appends)
		require.NoError(t, err)
		for j, w := range want {
			got := st.sub.next(t, 30*time.Second)
			require.Equal(t, w.Position, got.Position, "subscription %d from %s, event %d", i, st.from, j)
			require.Equal(t, w.ID, got.ID)
		}
		select {
		case e := <-st.sub.events:
			t.Fatalf("subscription %d received %s beyond the log", i, e.Position)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
