package esdb_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/esdb"
	"bookingledger/adapters/esdb/esdbtest"
	"bookingledger/domain/eventlog"
)

// collector records what a subscription handed over, and can hold the handler at one event.
type collector struct {
	mu     sync.Mutex
	got    []eventlog.RecordedEvent
	holdAt int           // 1-based count of the event to hold at (0: never)
	held   chan struct{} // closed when the handler reached holdAt
	resume chan struct{} // closed by the test to let it go on
}

func newCollector() *collector {
	return &collector{held: make(chan struct{}), resume: make(chan struct{})}
}

func (c *collector) handle(r eventlog.RecordedEvent) error {
	c.mu.Lock()
	c.got = append(c.got, r)
	n := len(c.got)
	c.mu.Unlock()
	if n == c.holdAt {
		close(c.held)
		<-c.resume
	}
	return nil
}

func (c *collector) ids() []eventlog.EventID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ids(c.got)
}

func (c *collector) waitFor(t *testing.T, n int) []eventlog.EventID {
	t.Helper()
	require.Eventually(t, func() bool { return len(c.ids()) >= n }, 20*time.Second, 5*time.Millisecond,
		"subscription delivered %d of %d events", len(c.ids()), n)
	// Give a wrongly repeated event the chance to show up.
	time.Sleep(50 * time.Millisecond)
	return c.ids()
}

func subscribe(t *testing.T, s *esdb.Store, from eventlog.Position, c *collector) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Subscribe(ctx, from, c.handle) }()
	return func() error {
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(10 * time.Second):
			return errors.New("Subscribe did not return after its context ended")
		}
	}
}

func appendN(t *testing.T, s *esdb.Store, stream string, n int) []eventlog.EventID {
	t.Helper()
	var out []eventlog.EventID
	for range n {
		ev := newEvent("test.e.v1")
		_, err := s.Append(ctxFor(t), stream, eventlog.Any(), []eventlog.EventData{ev})
		require.NoError(t, err)
		out = append(out, ev.ID)
	}
	return out
}

// TestSubscribeCatchUpFromSavedPositionThenLive: a projection saved the position of the 3rd event; it
// must get the 4th and 5th (catch-up: subscriptions to $all are live-only unless given a position),
// then new events, and nothing of other categories.
func TestSubscribeCatchUpFromSavedPositionThenLive(t *testing.T) {
	srv := esdbtest.New(t)
	s := openStore(t, srv.ConnString())
	name := bookingStream(t)
	first := appendN(t, s, name, 5)
	appendN(t, openStore(t, srv.ConnString(), esdb.WithStreamPrefix("other-")), "other-1", 2)
	recs, err := s.ReadStream(ctxFor(t), name)
	require.NoError(t, err)

	c := newCollector()
	stop := subscribe(t, s, recs[2].Position, c)
	assert.Equal(t, first[3:], c.waitFor(t, 2))
	live := appendN(t, s, name, 3)
	assert.Equal(t, append(first[3:], live...), c.waitFor(t, 5))
	require.ErrorIs(t, stop(), context.Canceled)
}

func TestSubscribeFromZeroDeliversEverything(t *testing.T) {
	srv := esdbtest.New(t)
	s := openStore(t, srv.ConnString())
	want := appendN(t, s, bookingStream(t), 3)
	c := newCollector()
	stop := subscribe(t, s, eventlog.Position{}, c)
	assert.Equal(t, want, c.waitFor(t, 3), "system events and ID claims are not handed over")
	require.ErrorIs(t, stop(), context.Canceled)
}

// TestSubscribeResumesAfterDrops drops the server's subscriptions in the middle of catching up and
// again while live; every event must arrive once, in order. The inclusive variant's server replays
// the start event on every resubscription, which the store must skip.
func TestSubscribeResumesAfterDrops(t *testing.T) {
	for _, variant := range []struct {
		name string
		opts []esdbtest.Option
	}{
		{"server skips the start event", nil},
		{"server replays the start event", []esdbtest.Option{esdbtest.WithInclusiveSubscriptionStart()}},
	} {
		t.Run(variant.name, func(t *testing.T) {
			srv := esdbtest.New(t, variant.opts...)
			s := openStore(t, srv.ConnString(), esdb.WithResubscribeBackoff(5*time.Millisecond, 50*time.Millisecond))
			name := bookingStream(t)
			want := appendN(t, s, name, 6)

			c := newCollector()
			c.holdAt = 3
			stop := subscribe(t, s, eventlog.Position{}, c)
			select {
			case <-c.held:
			case <-time.After(20 * time.Second):
				t.Fatal("subscription never reached the 3rd event")
			}
			require.Equal(t, 1, srv.DropSubscriptions(), "drop while the handler is busy with the 3rd event")
			close(c.resume)
			assert.Equal(t, want, c.waitFor(t, 6))
			require.Eventually(t, func() bool { return srv.Subscriptions() == 1 }, 10*time.Second, 5*time.Millisecond)

			require.Equal(t, 1, srv.DropSubscriptions(), "drop while live")
			want = append(want, appendN(t, s, name, 4)...)
			assert.Equal(t, want, c.waitFor(t, 10))
			assert.GreaterOrEqual(t, srv.SubscriptionsStarted(), uint64(3), "it resubscribed after each drop")
			require.ErrorIs(t, stop(), context.Canceled)
		})
	}
}

// TestSubscribeSurvivesNodeRestart: the subscription keeps trying while the node is down and resumes
// where it was once it is back, through a client the store had to replace.
func TestSubscribeSurvivesNodeRestart(t *testing.T) {
	srv := esdbtest.New(t)
	s := openStore(t, srv.ConnString(), esdb.WithResubscribeBackoff(5*time.Millisecond, 50*time.Millisecond))
	name := bookingStream(t)
	want := appendN(t, s, name, 2)
	c := newCollector()
	stop := subscribe(t, s, eventlog.Position{}, c)
	c.waitFor(t, 2)

	srv.Stop()
	time.Sleep(200 * time.Millisecond) // several failed resubscriptions
	require.NoError(t, srv.Restart())
	want = append(want, appendN(t, s, name, 2)...)
	assert.Equal(t, want, c.waitFor(t, 4))
	require.ErrorIs(t, stop(), context.Canceled)
}

// TestSubscribeToEveryStreamLeavesClaimsOut: with every prefix the server's filter only leaves out
// system events, so the event-ID claims each append writes reach the store, which drops them.
func TestSubscribeToEveryStreamLeavesClaimsOut(t *testing.T) {
	srv := esdbtest.New(t)
	s := openStore(t, srv.ConnString(), esdb.WithStreamPrefix(""))
	want := appendN(t, s, bookingStream(t), 3)
	c := newCollector()
	stop := subscribe(t, s, eventlog.Position{}, c)
	assert.Equal(t, want, c.waitFor(t, 3))
	require.ErrorIs(t, stop(), context.Canceled)
}

// waits records the waits the store logs before each resubscription.
type waits struct {
	mu  sync.Mutex
	got []time.Duration
}

func (w *waits) Enabled(context.Context, slog.Level) bool { return true }
func (w *waits) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *waits) WithGroup(string) slog.Handler            { return w }
func (w *waits) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "wait" {
			w.mu.Lock()
			w.got = append(w.got, a.Value.Duration())
			w.mu.Unlock()
		}
		return true
	})
	return nil
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.got...)
}

// TestResubscribeBackoffDoublesToItsBoundAndResetsOnProgress: while the node is down each failed
// resubscription waits twice as long as the one before, up to the bound; a subscription that handed
// over an event starts again from the shortest wait.
func TestResubscribeBackoffDoublesToItsBoundAndResetsOnProgress(t *testing.T) {
	srv := esdbtest.New(t)
	w := &waits{}
	s := openStore(t, srv.ConnString(), esdb.WithResubscribeBackoff(time.Millisecond, 8*time.Millisecond), esdb.WithLogger(slog.New(w)))
	name := bookingStream(t)
	c := newCollector()
	stop := subscribe(t, s, eventlog.Position{}, c)
	appendN(t, s, name, 1)
	c.waitFor(t, 1)

	srv.Stop()
	require.Eventually(t, func() bool { return len(w.all()) >= 6 }, 20*time.Second, time.Millisecond)
	require.NoError(t, srv.Restart())
	assert.Equal(t, []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 8 * time.Millisecond, 8 * time.Millisecond, 8 * time.Millisecond}, w.all()[:6])

	appendN(t, s, name, 1)
	c.waitFor(t, 2)
	before := len(w.all())
	require.Equal(t, 1, srv.DropSubscriptions())
	require.Eventually(t, func() bool { return len(w.all()) > before }, 20*time.Second, time.Millisecond)
	assert.Equal(t, time.Millisecond, w.all()[before], "the subscription that handed over an event waits the least")
	require.ErrorIs(t, stop(), context.Canceled)
}

func TestSubscribeEndsWithTheHandlersError(t *testing.T) {
	srv := esdbtest.New(t)
	s := openStore(t, srv.ConnString())
	events := appendN(t, s, bookingStream(t), 3)
	boom := errors.New("projection failed")
	var seen []eventlog.EventID
	err := s.Subscribe(ctxFor(t), eventlog.Position{}, func(r eventlog.RecordedEvent) error {
		seen = append(seen, r.ID)
		if len(seen) == 2 {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, events[:2], seen, "no event after the failing one")
	assert.Eventually(t, func() bool { return srv.Subscriptions() == 0 }, 10*time.Second, 5*time.Millisecond,
		"the server-side subscription is closed")
}
