package esdbtest_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/esdb/esdbtest"
)

// These tests drive the test server with the real v4 client, so they pin what the client sees.

func client(t *testing.T, conn string) *esdb.Client {
	t.Helper()
	conf, err := esdb.ParseConnectionString(conn)
	require.NoError(t, err)
	conf.Logger = esdb.NoopLogging()
	c, err := esdb.NewClient(conf)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func event(typ string) esdb.EventData {
	return esdb.EventData{EventID: uuid.New(), EventType: typ, ContentType: esdb.ContentTypeJson, Data: []byte(`{"n":1}`), Metadata: []byte(`{"m":true}`)}
}

func readStream(t *testing.T, c *esdb.Client, stream string) ([]*esdb.RecordedEvent, error) {
	t.Helper()
	rs, err := c.ReadStream(ctxFor(t), stream, esdb.ReadStreamOptions{From: esdb.Start{}}, 1000)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []*esdb.RecordedEvent
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev.Event)
	}
}

func readAll(t *testing.T, c *esdb.Client, opts esdb.ReadAllOptions, n uint64) []*esdb.RecordedEvent {
	t.Helper()
	rs, err := c.ReadAll(ctxFor(t), opts, n)
	require.NoError(t, err)
	defer rs.Close()
	var out []*esdb.RecordedEvent
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, ev.Event)
	}
}

func TestExpectedRevisionChecks(t *testing.T) {
	srv := esdbtest.New(t)
	c := client(t, srv.ConnString())
	cases := []struct {
		name     string
		existing int
		expected esdb.ExpectedRevision
		ok       bool
	}{
		{"any on missing stream", 0, esdb.Any{}, true},
		{"any on existing stream", 2, esdb.Any{}, true},
		{"no stream on missing stream", 0, esdb.NoStream{}, true},
		{"no stream on existing stream", 1, esdb.NoStream{}, false},
		{"stream exists on missing stream", 0, esdb.StreamExists{}, false},
		{"stream exists on existing stream", 1, esdb.StreamExists{}, true},
		{"revision of the last event", 3, esdb.Revision(2), true},
		{"revision behind", 3, esdb.Revision(1), false},
		{"revision ahead", 3, esdb.Revision(3), false},
		{"revision 0 on missing stream", 0, esdb.Revision(0), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stream := "test-" + uuid.NewString()
			for range tc.existing {
				_, err := c.AppendToStream(ctxFor(t), stream, esdb.AppendToStreamOptions{}, event("seed"))
				require.NoError(t, err)
			}
			wr, err := c.AppendToStream(ctxFor(t), stream, esdb.AppendToStreamOptions{ExpectedRevision: tc.expected}, event("x"))
			if tc.ok {
				require.NoError(t, err)
				assert.Equal(t, uint64(tc.existing), wr.NextExpectedVersion, "revision of the appended event")
				assert.NotZero(t, wr.CommitPosition)
				return
			}
			var e *esdb.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, esdb.ErrorCodeWrongExpectedVersion, e.Code(), "the client must see the server's WrongExpectedVersion result: %v", err)
			_, fromOK := esdb.FromError(err)
			assert.False(t, fromOK, "FromError reports ok only for a nil error")
			assert.Equal(t, tc.existing, srv.StreamLength(stream), "a refused append writes nothing")
		})
	}
}

func TestWrongExpectedVersionNamesBothRevisions(t *testing.T) {
	srv := esdbtest.New(t)
	c := client(t, srv.ConnString())
	_, err := c.AppendToStream(ctxFor(t), "s-1", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, event("a"), event("b"))
	require.NoError(t, err)
	_, err = c.AppendToStream(ctxFor(t), "s-1", esdb.AppendToStreamOptions{ExpectedRevision: esdb.Revision(5)}, event("c"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "expecting '5' but got '1'")
	_, err = c.AppendToStream(ctxFor(t), "s-2", esdb.AppendToStreamOptions{ExpectedRevision: esdb.StreamExists{}}, event("c"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "expecting 'stream_exists' but got 'no_stream'")
}

func TestStreamNotFound(t *testing.T) {
	srv := esdbtest.New(t)
	c := client(t, srv.ConnString())
	_, err := readStream(t, c, "nobody-"+uuid.NewString())
	var e *esdb.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, esdb.ErrorCodeResourceNotFound, e.Code())
}

func TestIdempotentReappendAtSameRevision(t *testing.T) {
	srv := esdbtest.New(t)
	c := client(t, srv.ConnString())
	a, b := event("a"), event("b")
	first, err := c.AppendToStream(ctxFor(t), "idem-1", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, a, b)
	require.NoError(t, err)
	_, err = c.AppendToStream(ctxFor(t), "idem-1", esdb.AppendToStreamOptions{ExpectedRevision: esdb.Revision(1)}, event("c"))
	require.NoError(t, err)

	// Same IDs at the same expected revision: success with the original revision and position, even
	// after the stream moved on and after the cache is gone (the check reads the stream).
	srv.ForgetIdempotencyCache()
	again, err := c.AppendToStream(ctxFor(t), "idem-1", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, a, b)
	require.NoError(t, err)
	assert.Equal(t, first.NextExpectedVersion, again.NextExpectedVersion)
	assert.Equal(t, first.CommitPosition, again.CommitPosition)
	assert.Equal(t, first.PreparePosition, again.PreparePosition)
	assert.Equal(t, 3, srv.StreamLength("idem-1"))

	// Only part of them at that revision: refused.
	_, err = c.AppendToStream(ctxFor(t), "idem-1", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, a, event("d"))
	var e *esdb.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, esdb.ErrorCodeWrongExpectedVersion, e.Code())
}

func TestIdempotencyUnderAnyIsOnlyACache(t *testing.T) {
	srv := esdbtest.New(t)
	c := client(t, srv.ConnString())
	a := event("a")
	_, err := c.AppendToStream(ctxFor(t), "any-1", esdb.AppendToStreamOptions{}, a)
	require.NoError(t, err)
	_, err = c.AppendToStream(ctxFor(t), "any-1", esdb.AppendToStreamOptions{}, a)
	require.NoError(t, err)
	assert.Equal(t, 1, srv.StreamLength("any-1"), "while cached, a re-append under any is idempotent")

	srv.ForgetIdempotencyCache() // what a restart does
	_, err = c.AppendToStream(ctxFor(t), "any-1", esdb.AppendToStreamOptions{}, a)
	require.NoError(t, err)
	assert.Equal(t, 2, srv.StreamLength("any-1"), "after the cache is lost the same event is written twice")
}

func TestAllIsOneLogWithIncreasingPositions(t *testing.T) {
	srv := esdbtest.New(t)
	c := client(t, srv.ConnString())
	for i := range 6 {
		stream := []string{"x-1", "y-1"}[i%2]
		_, err := c.AppendToStream(ctxFor(t), stream, esdb.AppendToStreamOptions{}, event("e"))
		require.NoError(t, err)
	}
	all := readAll(t, c, esdb.ReadAllOptions{From: esdb.Start{}}, 100)
	require.Len(t, all, 8, "two system events, then ours")
	assert.Equal(t, "$metadata", all[0].EventType, "a fresh node's $all starts with system events")
	for i := 1; i < len(all); i++ {
		assert.Greater(t, all[i].Position.Commit, all[i-1].Position.Commit)
		assert.Equal(t, all[i].Position.Commit, all[i].Position.Prepare)
		assert.False(t, all[i].CreatedDate.IsZero())
	}

	from := all[4].Position
	fwd := readAll(t, c, esdb.ReadAllOptions{From: from}, 2)
	require.Len(t, fwd, 2)
	assert.Equal(t, all[4].EventID, fwd[0].EventID, "a forward read includes the event at its position")
	assert.Equal(t, all[5].EventID, fwd[1].EventID)

	back := readAll(t, c, esdb.ReadAllOptions{From: from, Direction: esdb.Backwards}, 2)
	require.Len(t, back, 2)
	assert.Equal(t, all[3].EventID, back[0].EventID, "a backward read starts before its position")
	assert.Equal(t, all[2].EventID, back[1].EventID)

	last := readAll(t, c, esdb.ReadAllOptions{From: esdb.End{}, Direction: esdb.Backwards}, 1)
	require.Len(t, last, 1)
	assert.Equal(t, all[7].EventID, last[0].EventID)
}

func TestEventRoundTripsThroughTheWire(t *testing.T) {
	srv := esdbtest.New(t)
	c := client(t, srv.ConnString())
	ev := event("rt")
	ev.Data = []byte{0, 0xff, 'x'}
	_, err := c.AppendToStream(ctxFor(t), "rt-1", esdb.AppendToStreamOptions{}, ev)
	require.NoError(t, err)
	recs, err := readStream(t, c, "rt-1")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	r := recs[0]
	assert.Equal(t, ev.EventID, r.EventID)
	assert.Equal(t, "rt", r.EventType)
	assert.Equal(t, "application/json", r.ContentType)
	assert.Equal(t, ev.Data, r.Data)
	assert.Equal(t, ev.Metadata, r.UserMetadata)
	assert.Equal(t, uint64(0), r.EventNumber, "revisions are 0-based")
	assert.WithinDuration(t, time.Now(), r.CreatedDate, time.Minute)
}

func TestFilteredCatchUpSubscription(t *testing.T) {
	srv := esdbtest.New(t)
	c := client(t, srv.ConnString())
	var want []uuid.UUID
	for i := range 40 {
		stream := "other-1"
		if i%4 == 0 {
			stream = "booking-1"
		}
		ev := event("e")
		_, err := c.AppendToStream(ctxFor(t), stream, esdb.AppendToStreamOptions{}, ev)
		require.NoError(t, err)
		if stream == "booking-1" {
			want = append(want, ev.EventID)
		}
	}
	start := readAll(t, c, esdb.ReadAllOptions{From: esdb.Start{}}, 1000)[2+4].Position // our 5th event: booking-1's 2nd
	sub, err := c.SubscribeToAll(ctxFor(t), esdb.SubscribeToAllOptions{
		From:   start,
		Filter: &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: []string{"booking-"}},
		// The client's defaults (window 32, multiplier 1): a checkpoint every 32 examined events.
	})
	require.NoError(t, err)
	defer sub.Close()

	var got []uuid.UUID
	checkpoints, caughtUp := 0, false
	deadline := time.After(10 * time.Second)
	next := func() *esdb.SubscriptionEvent {
		ch := make(chan *esdb.SubscriptionEvent, 1)
		go func() { ch <- sub.Recv() }()
		select {
		case ev := <-ch:
			return ev
		case <-deadline:
			t.Fatal("subscription stalled")
			return nil
		}
	}
	for !caughtUp {
		ev := next()
		require.Nil(t, ev.SubscriptionDropped)
		switch {
		case ev.EventAppeared != nil:
			assert.Equal(t, "booking-1", ev.EventAppeared.Event.StreamID)
			got = append(got, ev.EventAppeared.Event.EventID)
		case ev.CheckPointReached != nil:
			checkpoints++
		case ev.CaughtUp != nil:
			caughtUp = true
		}
	}
	assert.Equal(t, want[2:], got, "catch-up starts after the start position (booking-1's 2nd event) and keeps the filter")
	assert.Positive(t, checkpoints, "filtered subscriptions report checkpoints")

	live := event("live")
	_, err = c.AppendToStream(ctxFor(t), "booking-2", esdb.AppendToStreamOptions{}, live)
	require.NoError(t, err)
	for {
		ev := next()
		require.Nil(t, ev.SubscriptionDropped)
		if ev.EventAppeared != nil {
			assert.Equal(t, live.EventID, ev.EventAppeared.Event.EventID)
			break
		}
	}

	require.Equal(t, 1, srv.DropSubscriptions())
	for {
		ev := next()
		if ev.SubscriptionDropped != nil {
			assert.Error(t, ev.SubscriptionDropped.Error)
			break
		}
	}
}

func TestStopRestartKeepsTheLog(t *testing.T) {
	srv := esdbtest.New(t)
	c := client(t, srv.ConnString())
	_, err := c.AppendToStream(ctxFor(t), "keep-1", esdb.AppendToStreamOptions{}, event("a"))
	require.NoError(t, err)
	srv.Stop()
	_, err = c.AppendToStream(ctxFor(t), "keep-1", esdb.AppendToStreamOptions{}, event("b"))
	require.Error(t, err, "a stopped node refuses calls")
	require.NoError(t, srv.Restart())

	c2 := client(t, srv.ConnString())
	recs, err := readStream(t, c2, "keep-1")
	require.NoError(t, err)
	assert.Len(t, recs, 1, "the log survives a restart")
}

func TestDiscoveryThroughGossip(t *testing.T) {
	srv := esdbtest.New(t)
	c := client(t, srv.DiscoverConnString())
	_, err := c.AppendToStream(ctxFor(t), "disc-1", esdb.AppendToStreamOptions{}, event("a"))
	require.NoError(t, err)
	assert.Equal(t, 1, srv.StreamLength("disc-1"))
}

// TestNodesOfAServingProcess drives nodes the way New serves them when EnvServer is set (another
// process, here a goroutine behind the same control protocol): each node has its own log, options
// and faults, and every control method reaches it.
func TestNodesOfAServingProcess(t *testing.T) {
	srv := esdbtest.NewThroughControl(t)
	empty := esdbtest.NewThroughControl(t, esdbtest.WithoutSystemEvents(), esdbtest.WithIdempotencyCacheSize(0))
	require.NotEqual(t, srv.Addr(), empty.Addr(), "each node listens on its own address")
	assert.Equal(t, 2, srv.AllCount(), "the system events of a fresh node")
	assert.Equal(t, 0, empty.AllCount(), "WithoutSystemEvents reaches the serving process")

	c := client(t, srv.ConnString())
	a := event("a")
	_, err := c.AppendToStream(ctxFor(t), "remote-1", esdb.AppendToStreamOptions{}, a)
	require.NoError(t, err)
	assert.Equal(t, 1, srv.StreamLength("remote-1"))
	assert.Equal(t, 0, empty.StreamLength("remote-1"), "nodes do not share their logs")

	// The cache forgets: a retry under "any" is written again.
	srv.ForgetIdempotencyCache()
	_, err = c.AppendToStream(ctxFor(t), "remote-1", esdb.AppendToStreamOptions{}, a)
	require.NoError(t, err)
	assert.Equal(t, 2, srv.StreamLength("remote-1"))

	// Another writer wins the race once.
	srv.WriteAhead("remote-1", 1)
	_, err = c.AppendToStream(ctxFor(t), "remote-1", esdb.AppendToStreamOptions{ExpectedRevision: esdb.Revision(1)}, event("b"))
	require.Error(t, err, "the expected revision was overtaken")
	assert.Equal(t, 3, srv.StreamLength("remote-1"))

	sub, err := c.SubscribeToAll(ctxFor(t), esdb.SubscribeToAllOptions{From: esdb.Start{}})
	require.NoError(t, err)
	defer sub.Close()
	for {
		ev := sub.Recv()
		require.Nil(t, ev.SubscriptionDropped)
		if ev.EventAppeared != nil {
			break
		}
	}
	assert.Equal(t, uint64(1), srv.SubscriptionsStarted())
	assert.Equal(t, 1, srv.Subscriptions())
	assert.Equal(t, 1, srv.DropSubscriptions())
	assert.Equal(t, 0, srv.Subscriptions())

	srv.Stop()
	_, err = c.AppendToStream(ctxFor(t), "remote-1", esdb.AppendToStreamOptions{}, event("c"))
	require.Error(t, err, "a stopped node refuses calls")
	require.NoError(t, srv.Restart())
	recs, err := readStream(t, client(t, srv.ConnString()), "remote-1")
	require.NoError(t, err)
	assert.Len(t, recs, 3, "the log survives a restart")

	srv.Close()
	srv.Close() // as in-process: closing twice is fine, and the closed node stays closed
	require.Error(t, srv.Restart())
	assert.Equal(t, 3, srv.StreamLength("remote-1"), "a closed node keeps its log until its test ends")
}
