package esdb_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientesdb "github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/esdb"
	"bookingledger/adapters/esdb/esdbtest"
	"bookingledger/domain/eventlog"
)

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func bookingStream(t *testing.T) string {
	t.Helper()
	return "booking-test-" + uuid.NewString()[:8]
}

func newEvent(typ string) eventlog.EventData {
	id := uuid.New()
	return eventlog.EventData{ID: eventlog.EventID(id), Type: typ, Data: []byte(fmt.Sprintf(`{"id":%q}`, id)), Metadata: []byte(`{"source":"test"}`)}
}

func ids(recs []eventlog.RecordedEvent) []eventlog.EventID {
	out := make([]eventlog.EventID, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

func dataIDs(events ...eventlog.EventData) []eventlog.EventID {
	out := make([]eventlog.EventID, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

// rawClient talks to the server without the adapter, to see what it really stored.
func rawClient(t *testing.T, conn string) *clientesdb.Client {
	t.Helper()
	conf, err := clientesdb.ParseConnectionString(conn)
	require.NoError(t, err)
	conf.Logger = clientesdb.NoopLogging()
	c, err := clientesdb.NewClient(conf)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func rawRead(t *testing.T, c *clientesdb.Client, stream string) []*clientesdb.RecordedEvent {
	t.Helper()
	rs, err := c.ReadStream(ctxFor(t), stream, clientesdb.ReadStreamOptions{From: clientesdb.Start{}}, 1000)
	require.NoError(t, err)
	defer rs.Close()
	var out []*clientesdb.RecordedEvent
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, ev.Event)
	}
}

func TestExpectedRevisionMapping(t *testing.T) {
	cases := []struct {
		name     string
		expected eventlog.ExpectedVersion
		want     clientesdb.ExpectedRevision
	}{
		{"any", eventlog.Any(), clientesdb.Any{}},
		{"no stream", eventlog.NoStream(), clientesdb.NoStream{}},
		{"stream exists", eventlog.StreamExists(), clientesdb.StreamExists{}},
		{"exact 0 is no stream", eventlog.Exact(0), clientesdb.NoStream{}},
		{"exact 1 is revision 0", eventlog.Exact(1), clientesdb.Revision(0)},
		{"exact 7 is revision 6", eventlog.Exact(7), clientesdb.Revision(6)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, esdb.ExpectedRevision(tc.expected))
		})
	}
}

// TestVersionsOnTheWire checks the 1-based port versions against the 0-based revisions the server
// stores, and that the event ID, type, content type and metadata are the port's.
func TestVersionsOnTheWire(t *testing.T) {
	srv := esdbtest.New(t)
	s := openStore(t, srv.ConnString())
	raw := rawClient(t, srv.ConnString())
	name := bookingStream(t)
	a, b, c := newEvent("test.a.v1"), newEvent("test.b.v1"), newEvent("test.c.v1")

	res, err := s.Append(ctxFor(t), name, eventlog.Exact(0), []eventlog.EventData{a, b})
	require.NoError(t, err)
	assert.Equal(t, uint64(1), res.FirstVersion)
	assert.Equal(t, uint64(2), res.LastVersion)
	res, err = s.Append(ctxFor(t), name, eventlog.Exact(2), []eventlog.EventData{c})
	require.NoError(t, err)
	assert.Equal(t, uint64(3), res.FirstVersion)

	stored := rawRead(t, raw, name)
	require.Len(t, stored, 3)
	for i, e := range []eventlog.EventData{a, b, c} {
		assert.Equal(t, uint64(i), stored[i].EventNumber, "server revision of port version %d", i+1)
		assert.Equal(t, uuid.UUID(e.ID), stored[i].EventID, "the port's event ID, never a random one")
		assert.Equal(t, e.Type, stored[i].EventType)
		assert.Equal(t, "application/json", stored[i].ContentType)
		assert.Equal(t, e.Metadata, stored[i].UserMetadata)
	}
	recs, err := s.ReadStream(ctxFor(t), name)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	assert.Equal(t, []uint64{1, 2, 3}, []uint64{recs[0].Version, recs[1].Version, recs[2].Version})
	assert.Equal(t, res.Position, recs[2].Position)

	_, err = s.Append(ctxFor(t), name, eventlog.Exact(2), []eventlog.EventData{newEvent("test.d.v1")})
	require.ErrorIs(t, err, eventlog.ErrVersionConflict)
}

// TestIdempotencyDoesNotNeedTheServerCache re-appends after the server lost its event-ID cache (what
// a restart does): the raw client would write the event twice under "any", the store must not.
func TestIdempotencyDoesNotNeedTheServerCache(t *testing.T) {
	srv := esdbtest.New(t)
	s := openStore(t, srv.ConnString())
	name := bookingStream(t)
	events := []eventlog.EventData{newEvent("test.a.v1"), newEvent("test.b.v1")}
	first, err := s.Append(ctxFor(t), name, eventlog.Any(), events)
	require.NoError(t, err)
	require.False(t, first.Duplicate)

	for _, exp := range []eventlog.ExpectedVersion{eventlog.Any(), eventlog.StreamExists(), eventlog.NoStream(), eventlog.Exact(2)} {
		t.Run(exp.String(), func(t *testing.T) {
			srv.ForgetIdempotencyCache()
			again, err := s.Append(ctxFor(t), name, exp, events)
			require.NoError(t, err)
			assert.True(t, again.Duplicate)
			assert.Equal(t, first, eventlog.AppendResult{
				FirstVersion: again.FirstVersion, LastVersion: again.LastVersion, Position: again.Position,
			}, "the original versions and position")
		})
	}
	assert.Equal(t, 2, srv.StreamLength(name), "the stream holds each event once")
}

func TestPartialDuplicate(t *testing.T) {
	srv := esdbtest.New(t)
	s := openStore(t, srv.ConnString())
	name := bookingStream(t)
	a, b, c := newEvent("test.a.v1"), newEvent("test.b.v1"), newEvent("test.c.v1")
	_, err := s.Append(ctxFor(t), name, eventlog.NoStream(), []eventlog.EventData{a, b, c})
	require.NoError(t, err)

	cases := map[string]struct {
		stream string
		events []eventlog.EventData
	}{
		"stored then new":            {name, []eventlog.EventData{c, newEvent("test.new.v1")}},
		"new then stored":            {name, []eventlog.EventData{newEvent("test.new.v1"), a}},
		"stored but not consecutive": {name, []eventlog.EventData{a, c}},
		"stored in another order":    {name, []eventlog.EventData{b, a}},
		"stored in another stream":   {bookingStream(t), []eventlog.EventData{b}},
	}
	for label, tc := range cases {
		t.Run(label, func(t *testing.T) {
			_, err := s.Append(ctxFor(t), tc.stream, eventlog.Any(), tc.events)
			require.ErrorIs(t, err, eventlog.ErrPartialDuplicate)
		})
	}
	assert.Equal(t, 3, srv.StreamLength(name))

	// A suffix of an earlier append, in order, is a duplicate of its own.
	res, err := s.Append(ctxFor(t), name, eventlog.Any(), []eventlog.EventData{b, c})
	require.NoError(t, err)
	assert.True(t, res.Duplicate)
	assert.Equal(t, uint64(2), res.FirstVersion)
	assert.Equal(t, uint64(3), res.LastVersion)
}

// TestEventIDClaimedAcrossStores: the cross-stream check holds for separate processes too, because the
// claim lives in the server, not in the store.
func TestEventIDClaimedAcrossStores(t *testing.T) {
	srv := esdbtest.New(t)
	s1, s2 := openStore(t, srv.ConnString()), openStore(t, srv.ConnString())
	ev := newEvent("test.a.v1")
	one, two := bookingStream(t), bookingStream(t)
	_, err := s1.Append(ctxFor(t), one, eventlog.Any(), []eventlog.EventData{ev})
	require.NoError(t, err)
	_, err = s2.Append(ctxFor(t), two, eventlog.Any(), []eventlog.EventData{ev})
	require.ErrorIs(t, err, eventlog.ErrPartialDuplicate)
	assert.Equal(t, 0, srv.StreamLength(two))
	assert.Equal(t, 1, srv.StreamLength(esdb.ClaimStreamPrefix+ev.ID.String()))
}

// TestConcurrentCopiesOfOneEvent sends 20 copies of one event at once through 4 stores (4 clients, as
// 4 processes would): the stream holds it once, every copy gets version 1, and within one store
// exactly one copy is told it wrote. The server has no event-ID cache, as after a restart, so only the
// store's own check and exact revisions can keep the copies out.
func TestConcurrentCopiesOfOneEvent(t *testing.T) {
	srv := esdbtest.New(t, esdbtest.WithIdempotencyCacheSize(0))
	stores := make([]*esdb.Store, 4)
	for i := range stores {
		stores[i] = openStore(t, srv.ConnString())
	}
	for _, exp := range []eventlog.ExpectedVersion{eventlog.Any(), eventlog.NoStream()} {
		t.Run(exp.String(), func(t *testing.T) {
			name := bookingStream(t)
			ev := newEvent("test.same.v1")
			const copies = 20
			var (
				wg      sync.WaitGroup
				written [4]atomic.Int32
				start   = make(chan struct{})
				errs    = make(chan error, copies)
			)
			for i := range copies {
				wg.Go(func() {
					<-start
					res, err := stores[i%4].Append(ctxFor(t), name, exp, []eventlog.EventData{ev})
					switch {
					case err != nil:
						errs <- err
					case res.FirstVersion != 1 || res.LastVersion != 1:
						errs <- fmt.Errorf("copy got versions %d..%d", res.FirstVersion, res.LastVersion)
					case !res.Duplicate:
						written[i%4].Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("copy: %v", err)
			}
			recs, err := stores[0].ReadStream(ctxFor(t), name)
			require.NoError(t, err)
			assert.Equal(t, []eventlog.EventID{ev.ID}, ids(recs), "stored exactly once")
			total := int32(0)
			for i := range written {
				assert.LessOrEqual(t, written[i].Load(), int32(1), "store %d told more than one copy it wrote", i)
				total += written[i].Load()
			}
			assert.GreaterOrEqual(t, total, int32(1))
		})
	}
}

// TestAppendReadsAgainWhenAnotherWriterWins: another process appends between a store's read of a
// stream and its write. Under "any" the store reads again and appends after that event, up to its
// bound of attempts; under "no stream" the stream it expected is gone, which is a version conflict.
func TestAppendReadsAgainWhenAnotherWriterWins(t *testing.T) {
	srv := esdbtest.New(t)
	store := openStore(t, srv.ConnString(), esdb.WithMaxAppendAttempts(3))
	name := bookingStream(t)
	ev := newEvent("test.a.v1")
	srv.WriteAhead(name, 2)
	res, err := store.Append(ctxFor(t), name, eventlog.Any(), []eventlog.EventData{ev})
	require.NoError(t, err, "two lost races, the third attempt writes")
	assert.Equal(t, uint64(3), res.FirstVersion)
	assert.Equal(t, uint64(3), res.LastVersion)
	recs, err := store.ReadStream(ctxFor(t), name)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	assert.Equal(t, ev.ID, recs[2].ID)
	assert.Equal(t, recs[2].Position, res.Position)

	// "Stream exists" is sent as the revision read too: sent as it is, the server would append after
	// the other writer's event, and the store would report the version it read plus one.
	ev1 := newEvent("test.a.v1")
	srv.WriteAhead(name, 1)
	res, err = store.Append(ctxFor(t), name, eventlog.StreamExists(), []eventlog.EventData{ev1})
	require.NoError(t, err)
	assert.Equal(t, uint64(5), res.FirstVersion, "after the other writer's event at 4")
	recs, err = store.ReadStream(ctxFor(t), name)
	require.NoError(t, err)
	require.Len(t, recs, 5)
	assert.Equal(t, ev1.ID, recs[4].ID)

	ev2 := newEvent("test.b.v1")
	srv.WriteAhead(name, 3)
	_, err = store.Append(ctxFor(t), name, eventlog.Any(), []eventlog.EventData{ev2})
	require.ErrorIs(t, err, eventlog.ErrVersionConflict)
	assert.ErrorContains(t, err, "after 3 attempts")
	assert.Equal(t, 8, srv.StreamLength(name), "the other writer's three events, none of ours")

	other := bookingStream(t)
	srv.WriteAhead(other, 1)
	_, err = store.Append(ctxFor(t), other, eventlog.NoStream(), []eventlog.EventData{newEvent("test.c.v1")})
	require.ErrorIs(t, err, eventlog.ErrVersionConflict)
	assert.Equal(t, 1, srv.StreamLength(other))
}

// TestReadAllSelectsByPrefix: a store returns the streams of its prefixes (the default: booking
// streams and the links stream), by prefix, not by a name that merely contains one; with every prefix
// it returns every stream; never a system stream, a system event type or an event-ID claim.
func TestReadAllSelectsByPrefix(t *testing.T) {
	srv := esdbtest.New(t)
	s := openStore(t, srv.ConnString())
	raw := rawClient(t, srv.ConnString())
	own := bookingStream(t)
	ev := newEvent("test.a.v1")
	_, err := s.Append(ctxFor(t), own, eventlog.Any(), []eventlog.EventData{ev}) // also writes its claim
	require.NoError(t, err)
	write := func(stream, typ string) eventlog.EventID {
		id := uuid.New()
		_, err := raw.AppendToStream(ctxFor(t), stream, clientesdb.AppendToStreamOptions{},
			clientesdb.EventData{EventID: id, EventType: typ, ContentType: clientesdb.ContentTypeJson, Data: []byte(`{}`)})
		require.NoError(t, err)
		return eventlog.EventID(id)
	}
	write(own, "$metadata")
	write("$$"+own, "$metadata")
	archived := write("archive-"+own, "test.a.v1")
	invoice := write("invoice-1", "invoice.v1")

	got, err := s.ReadAll(ctxFor(t), eventlog.Position{}, 100)
	require.NoError(t, err)
	assert.Equal(t, []eventlog.EventID{ev.ID}, ids(got))

	every := openStore(t, srv.ConnString(), esdb.WithStreamPrefix(""))
	got, err = every.ReadAll(ctxFor(t), eventlog.Position{}, 100)
	require.NoError(t, err)
	assert.Equal(t, []eventlog.EventID{ev.ID, archived, invoice}, ids(got))
}

// TestReadStreamPastOneBatch: a stream longer than one read batch (512 events) is read whole, by
// ReadStream and by the append's own read, which finds a re-append of the last events a duplicate.
func TestReadStreamPastOneBatch(t *testing.T) {
	srv := esdbtest.New(t)
	s := openStore(t, srv.ConnString())
	name := bookingStream(t)
	var want []eventlog.EventID
	var last []eventlog.EventData
	for range 13 {
		last = nil
		for range 50 {
			last = append(last, newEvent("test.a.v1"))
		}
		_, err := s.Append(ctxFor(t), name, eventlog.Any(), last)
		require.NoError(t, err)
		want = append(want, dataIDs(last...)...)
	}
	recs, err := s.ReadStream(ctxFor(t), name)
	require.NoError(t, err)
	assert.Equal(t, want, ids(recs))
	res, err := s.Append(ctxFor(t), name, eventlog.Any(), last)
	require.NoError(t, err)
	assert.True(t, res.Duplicate)
	assert.Equal(t, uint64(601), res.FirstVersion)
}

func TestMissingStreamReadsEmpty(t *testing.T) {
	srv := esdbtest.New(t)
	s := openStore(t, srv.ConnString())
	recs, err := s.ReadStream(ctxFor(t), bookingStream(t))
	require.NoError(t, err)
	assert.Empty(t, recs)
}

func TestReadAll(t *testing.T) {
	srv := esdbtest.New(t)
	s := openStore(t, srv.ConnString())
	raw := rawClient(t, srv.ConnString())
	a, b := bookingStream(t), bookingStream(t)
	var want []eventlog.EventID
	for i := range 5 {
		target := []string{a, b}[i%2]
		evs := []eventlog.EventData{newEvent("test.x.v1"), newEvent("test.y.v1")}
		_, err := s.Append(ctxFor(t), target, eventlog.Any(), evs)
		require.NoError(t, err)
		want = append(want, dataIDs(evs...)...)
		// Noise between them: another category, and a system stream.
		_, err = raw.AppendToStream(ctxFor(t), fmt.Sprintf("invoice-%d", i), clientesdb.AppendToStreamOptions{},
			clientesdb.EventData{EventID: uuid.New(), EventType: "invoice.v1", ContentType: clientesdb.ContentTypeJson, Data: []byte(`{}`)})
		require.NoError(t, err)
		_, err = raw.AppendToStream(ctxFor(t), "$$"+a, clientesdb.AppendToStreamOptions{},
			clientesdb.EventData{EventID: uuid.New(), EventType: "$metadata", ContentType: clientesdb.ContentTypeJson, Data: []byte(`{}`)})
		require.NoError(t, err)
	}

	all, err := s.ReadAll(ctxFor(t), eventlog.Position{}, 100)
	require.NoError(t, err)
	assert.Equal(t, want, ids(all), "booking events only (no system events, other categories or ID claims), in append order")
	for i := 1; i < len(all); i++ {
		assert.Equal(t, 1, all[i].Position.Compare(all[i-1].Position))
	}

	t.Run("from a position excludes that event", func(t *testing.T) {
		rest, err := s.ReadAll(ctxFor(t), all[3].Position, 100)
		require.NoError(t, err)
		assert.Equal(t, want[4:], ids(rest))
	})
	t.Run("limit", func(t *testing.T) {
		page, err := s.ReadAll(ctxFor(t), all[3].Position, 2)
		require.NoError(t, err)
		assert.Equal(t, want[4:6], ids(page))
	})
	t.Run("paging through with small limits gives the same sequence", func(t *testing.T) {
		var got []eventlog.EventID
		var from eventlog.Position
		for {
			page, err := s.ReadAll(ctxFor(t), from, 3)
			require.NoError(t, err)
			if len(page) == 0 {
				break
			}
			got = append(got, ids(page)...)
			from = page[len(page)-1].Position
		}
		assert.Equal(t, want, got)
	})
	t.Run("after the last event", func(t *testing.T) {
		none, err := s.ReadAll(ctxFor(t), all[len(all)-1].Position, 10)
		require.NoError(t, err)
		assert.Empty(t, none)
	})
	t.Run("another prefix", func(t *testing.T) {
		inv := openStore(t, srv.ConnString(), esdb.WithStreamPrefix("invoice-"))
		got, err := inv.ReadAll(ctxFor(t), eventlog.Position{}, 100)
		require.NoError(t, err)
		assert.Len(t, got, 5)
		for _, r := range got {
			assert.True(t, strings.HasPrefix(r.StreamID, "invoice-"))
		}
	})
}

// TestReadAllReadsPastLongRunsOfOtherEvents: $all reads cannot be filtered by this client, so a page
// of non-matching events must not end the read early.
func TestReadAllReadsPastLongRunsOfOtherEvents(t *testing.T) {
	srv := esdbtest.New(t)
	s := openStore(t, srv.ConnString())
	raw := rawClient(t, srv.ConnString())
	for i := range 300 {
		_, err := raw.AppendToStream(ctxFor(t), fmt.Sprintf("noise-%d", i%7), clientesdb.AppendToStreamOptions{},
			clientesdb.EventData{EventID: uuid.New(), EventType: "noise.v1", ContentType: clientesdb.ContentTypeJson, Data: []byte(`{}`)})
		require.NoError(t, err)
	}
	ev := newEvent("test.late.v1")
	_, err := s.Append(ctxFor(t), bookingStream(t), eventlog.Any(), []eventlog.EventData{ev})
	require.NoError(t, err)
	got, err := s.ReadAll(ctxFor(t), eventlog.Position{}, 1)
	require.NoError(t, err)
	assert.Equal(t, []eventlog.EventID{ev.ID}, ids(got))
}

func TestConnectionStrings(t *testing.T) {
	t.Run("kurrentdb scheme is refused with a hint", func(t *testing.T) {
		for _, conn := range []string{"kurrentdb://localhost:2113?tls=false", "kurrentdb+discover://cluster.local:2113", "KurrentDB://localhost:2113"} {
			_, err := esdb.Open(ctxFor(t), conn)
			require.Error(t, err, conn)
			assert.Contains(t, err.Error(), "esdb://", "the message says what to write instead")
			assert.Contains(t, strings.ToLower(err.Error()), "kurrentdb://")
		}
	})
	t.Run("errors do not repeat the password", func(t *testing.T) {
		for _, conn := range []string{"esdb://admin:s3cr3t@localhost:notaport?tls=false", "esdb://admin:s3cr3t@local host:2113", "esdb://admin:s3cr3t@localhost:2113/path"} {
			_, err := esdb.ParseConnString(conn)
			require.Error(t, err, conn)
			assert.NotContains(t, err.Error(), "s3cr3t")
		}
	})
	t.Run("valid forms parse", func(t *testing.T) {
		for _, conn := range []string{
			"esdb://localhost:2113?tls=false",
			"esdb://admin:changeit@localhost:2113?tls=true&tlsVerifyCert=false",
			"esdb+discover://cluster.example.com:2113?nodePreference=follower",
			"esdb://node1:2113,node2:2113,node3:2113?nodePreference=leader",
		} {
			_, err := esdb.ParseConnString(conn)
			assert.NoError(t, err, conn)
		}
	})
	t.Run("unreachable node", func(t *testing.T) {
		srv := esdbtest.New(t)
		conn := srv.ConnString()
		srv.Close()
		_, err := esdb.Open(ctxFor(t), conn)
		require.ErrorIs(t, err, eventlog.ErrUnavailable)
		_, err = esdb.Open(ctxFor(t), strings.Replace(conn, "://", "://admin:s3cr3t@", 1))
		require.ErrorIs(t, err, eventlog.ErrUnavailable)
		assert.NotContains(t, err.Error(), "s3cr3t", "the node's address, not its password")
		assert.Contains(t, err.Error(), "admin:xxxxx@")
	})
	t.Run("cluster discovery", func(t *testing.T) {
		srv := esdbtest.New(t)
		s := openStore(t, srv.DiscoverConnString())
		_, err := s.Append(ctxFor(t), bookingStream(t), eventlog.Any(), []eventlog.EventData{newEvent("test.a.v1")})
		require.NoError(t, err)
	})
}

// TestRecoversAfterNodeRestart: while the node is down calls fail with ErrUnavailable; the v4 client
// closes itself for good after a failed discovery, and the store must replace it once the node is back.
func TestRecoversAfterNodeRestart(t *testing.T) {
	srv := esdbtest.New(t)
	s := openStore(t, srv.ConnString())
	name := bookingStream(t)
	_, err := s.Append(ctxFor(t), name, eventlog.Any(), []eventlog.EventData{newEvent("test.a.v1")})
	require.NoError(t, err)

	srv.Stop()
	for range 3 { // the first call meets the broken connection, the next ones a failing discovery
		_, err = s.Append(ctxFor(t), name, eventlog.Any(), []eventlog.EventData{newEvent("test.b.v1")})
		require.ErrorIs(t, err, eventlog.ErrUnavailable)
		_, err = s.ReadStream(ctxFor(t), name)
		require.ErrorIs(t, err, eventlog.ErrUnavailable)
	}
	require.NoError(t, srv.Restart())

	ev := newEvent("test.c.v1")
	res, err := s.Append(ctxFor(t), name, eventlog.Any(), []eventlog.EventData{ev})
	require.NoError(t, err, "the store works again once the node is back")
	assert.Equal(t, uint64(2), res.FirstVersion)
}

func TestClose(t *testing.T) {
	srv := esdbtest.New(t)
	s := openStore(t, srv.ConnString())
	subErr := make(chan error, 1)
	go func() {
		subErr <- s.Subscribe(context.Background(), eventlog.Position{}, func(eventlog.RecordedEvent) error { return nil })
	}()
	require.Eventually(t, func() bool { return srv.Subscriptions() == 1 }, 10*time.Second, 5*time.Millisecond)

	s.Close()
	select {
	case err := <-subErr:
		assert.ErrorIs(t, err, esdb.ErrClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the subscription")
	}
	_, err := s.Append(ctxFor(t), bookingStream(t), eventlog.Any(), []eventlog.EventData{newEvent("test.a.v1")})
	assert.ErrorIs(t, err, esdb.ErrClosed)
	_, err = s.ReadStream(ctxFor(t), bookingStream(t))
	assert.ErrorIs(t, err, esdb.ErrClosed)
	s.Close() // idempotent
}
