package eventlogtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/eventlog"
)

// Factory returns a store for one test. It may be shared with other tests as long as stream names
// chosen by the suite do not collide (they carry a random suffix).
type Factory func(t *testing.T) eventlog.Store

// Run runs every conformance test against stores made by newStore.
func Run(t *testing.T, newStore Factory) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(*testing.T, eventlog.Store)
	}{
		{"ExpectedVersionModes", testExpectedVersionModes},
		{"InvalidAppend", testInvalidAppend},
		{"MissingStreamReadsEmpty", testMissingStream},
		{"RoundTrip", testRoundTrip},
		{"IdempotentReappend", testIdempotentReappend},
		{"PartialDuplicate", testPartialDuplicate},
		{"ConcurrentSameEvent", testConcurrentSameEvent},
		{"ConcurrentWritersOneStream", testConcurrentWriters},
		{"ReadAllFromPosition", testReadAllFromPosition},
		{"ConcurrentGlobalReader", testConcurrentGlobalReader},
		{"SubscriptionCatchUp", testSubscriptionCatchUp},
		{"CallersOwnTheirSlices", testCallersOwnTheirSlices},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// stream returns a unique booking stream name for this test.
func stream(t *testing.T, name string) string {
	t.Helper()
	return fmt.Sprintf("booking-conformance-%s-%s", name, uuid.NewString()[:8])
}

func newEvent(typ string) eventlog.EventData {
	id := uuid.New()
	return eventlog.EventData{
		ID:       eventlog.EventID(id),
		Type:     typ,
		Data:     []byte(fmt.Sprintf(`{"id":%q,"type":%q}`, id, typ)),
		Metadata: []byte(`{"source":"conformance"}`),
	}
}

func newEvents(n int) []eventlog.EventData {
	out := make([]eventlog.EventData, n)
	for i := range out {
		out[i] = newEvent(fmt.Sprintf("test.event.v%d", i+1))
	}
	return out
}

func mustAppend(t *testing.T, s eventlog.Store, stream string, expected eventlog.ExpectedVersion, events ...eventlog.EventData) eventlog.AppendResult {
	t.Helper()
	res, err := s.Append(ctxFor(t), stream, expected, events)
	require.NoError(t, err, "append %d events to %s with %s", len(events), stream, expected)
	return res
}

func ids(recs []eventlog.RecordedEvent) []eventlog.EventID {
	out := make([]eventlog.EventID, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

func testExpectedVersionModes(t *testing.T, s eventlog.Store) {
	cases := []struct {
		name     string
		existing int // events already in the stream
		expected eventlog.ExpectedVersion
		ok       bool
	}{
		{"any on new stream", 0, eventlog.Any(), true},
		{"any on existing stream", 2, eventlog.Any(), true},
		{"no-stream on new stream", 0, eventlog.NoStream(), true},
		{"no-stream on existing stream", 1, eventlog.NoStream(), false},
		{"stream-exists on new stream", 0, eventlog.StreamExists(), false},
		{"stream-exists on existing stream", 1, eventlog.StreamExists(), true},
		{"exact 0 on new stream", 0, eventlog.Exact(0), true},
		{"exact 1 on new stream", 0, eventlog.Exact(1), false},
		{"exact matching version", 3, eventlog.Exact(3), true},
		{"exact behind", 3, eventlog.Exact(2), false},
		{"exact ahead", 3, eventlog.Exact(4), false},
		{"exact 0 on existing stream", 1, eventlog.Exact(0), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := stream(t, "ev")
			if tc.existing > 0 {
				mustAppend(t, s, name, eventlog.NoStream(), newEvents(tc.existing)...)
			}
			ev := newEvent("test.appended.v1")
			res, err := s.Append(ctxFor(t), name, tc.expected, []eventlog.EventData{ev})
			recs, rerr := s.ReadStream(ctxFor(t), name)
			require.NoError(t, rerr)
			if !tc.ok {
				require.ErrorIs(t, err, eventlog.ErrVersionConflict)
				assert.Len(t, recs, tc.existing, "a refused append must write nothing")
				return
			}
			require.NoError(t, err)
			assert.False(t, res.Duplicate)
			assert.Equal(t, uint64(tc.existing+1), res.FirstVersion)
			assert.Equal(t, uint64(tc.existing+1), res.LastVersion)
			require.Len(t, recs, tc.existing+1)
			assert.Equal(t, ev.ID, recs[tc.existing].ID)
			assert.Equal(t, res.Position, recs[tc.existing].Position)
		})
	}
}

func testInvalidAppend(t *testing.T, s eventlog.Store) {
	ctx := ctxFor(t)
	_, err := s.Append(ctx, "", eventlog.Any(), newEvents(1))
	assert.ErrorIs(t, err, eventlog.ErrInvalidAppend, "empty stream name")
	_, err = s.Append(ctx, stream(t, "inv"), eventlog.Any(), nil)
	assert.ErrorIs(t, err, eventlog.ErrInvalidAppend, "no events")
	noID := newEvent("test.x.v1")
	noID.ID = eventlog.EventID{}
	_, err = s.Append(ctx, stream(t, "inv"), eventlog.Any(), []eventlog.EventData{noID})
	assert.ErrorIs(t, err, eventlog.ErrInvalidAppend, "zero event id")
	twice := newEvent("test.x.v1")
	_, err = s.Append(ctx, stream(t, "inv"), eventlog.Any(), []eventlog.EventData{twice, twice})
	assert.ErrorIs(t, err, eventlog.ErrInvalidAppend, "same id twice in one append")
}

func testMissingStream(t *testing.T, s eventlog.Store) {
	recs, err := s.ReadStream(ctxFor(t), stream(t, "missing"))
	require.NoError(t, err)
	assert.Empty(t, recs)
}

func testRoundTrip(t *testing.T, s eventlog.Store) {
	name := stream(t, "rt")
	events := newEvents(3)
	// Bytes must come back exactly, including bytes a JSON column would normalise.
	events[1].Data = []byte("{ \"spaced\" :  true,\n \"dup\":1, \"dup\":2 }")
	events[2].Data = []byte{0x00, 0xff, 0x10, 'x'}
	events[2].Metadata = nil
	res := mustAppend(t, s, name, eventlog.NoStream(), events...)
	assert.Equal(t, uint64(1), res.FirstVersion)
	assert.Equal(t, uint64(3), res.LastVersion)

	recs, err := s.ReadStream(ctxFor(t), name)
	require.NoError(t, err)
	require.Len(t, recs, 3)
	for i, r := range recs {
		assert.Equal(t, name, r.StreamID)
		assert.Equal(t, uint64(i+1), r.Version)
		assert.Equal(t, events[i].ID, r.ID)
		assert.Equal(t, events[i].Type, r.Type)
		assert.Equal(t, events[i].Data, r.Data, "data of event %d", i)
		assert.Equal(t, len(events[i].Metadata), len(r.Metadata), "metadata length of event %d", i)
		if len(events[i].Metadata) > 0 {
			assert.Equal(t, events[i].Metadata, r.Metadata)
		}
		assert.False(t, r.RecordedAt.IsZero(), "recorded at")
		if i > 0 {
			assert.Equal(t, 1, r.Position.Compare(recs[i-1].Position), "positions increase within a stream")
		}
	}
	assert.Equal(t, recs[2].Position, res.Position, "result position is the last event's")
}

func testIdempotentReappend(t *testing.T, s eventlog.Store) {
	name := stream(t, "idem")
	events := newEvents(2)
	first := mustAppend(t, s, name, eventlog.NoStream(), events...)
	for _, exp := range []eventlog.ExpectedVersion{eventlog.NoStream(), eventlog.Any(), eventlog.Exact(0), eventlog.Exact(2), eventlog.StreamExists()} {
		t.Run(exp.String(), func(t *testing.T) {
			again := mustAppend(t, s, name, exp, events...)
			assert.True(t, again.Duplicate, "re-append must be recognised")
			assert.Equal(t, first.FirstVersion, again.FirstVersion)
			assert.Equal(t, first.LastVersion, again.LastVersion)
			assert.Equal(t, first.Position, again.Position)
		})
	}
	// A single already stored event is a duplicate on its own too.
	one := mustAppend(t, s, name, eventlog.Any(), events[1])
	assert.True(t, one.Duplicate)
	assert.Equal(t, uint64(2), one.FirstVersion)

	recs, err := s.ReadStream(ctxFor(t), name)
	require.NoError(t, err)
	assert.Equal(t, []eventlog.EventID{events[0].ID, events[1].ID}, ids(recs), "stream unchanged by re-appends")
}

func testPartialDuplicate(t *testing.T, s eventlog.Store) {
	name := stream(t, "partial")
	events := newEvents(3)
	mustAppend(t, s, name, eventlog.NoStream(), events...)
	fresh := newEvent("test.fresh.v1")
	cases := map[string]struct {
		stream string
		events []eventlog.EventData
	}{
		"stored and new mixed":                    {name, []eventlog.EventData{events[1], fresh}},
		"stored in another order":                 {name, []eventlog.EventData{events[1], events[0]}},
		"stored in another order after the first": {name, []eventlog.EventData{events[0], events[2], events[1]}},
		"stored in another stream":                {stream(t, "other"), []eventlog.EventData{events[0]}},
	}
	for label, tc := range cases {
		t.Run(label, func(t *testing.T) {
			_, err := s.Append(ctxFor(t), tc.stream, eventlog.Any(), tc.events)
			require.ErrorIs(t, err, eventlog.ErrPartialDuplicate)
		})
	}
	recs, err := s.ReadStream(ctxFor(t), name)
	require.NoError(t, err)
	assert.Equal(t, []eventlog.EventID{events[0].ID, events[1].ID, events[2].ID}, ids(recs), "nothing written by refused appends")
}

func testConcurrentSameEvent(t *testing.T, s eventlog.Store) {
	name := stream(t, "same")
	ev := newEvent("test.same.v1")
	const n = 50
	var (
		wg       sync.WaitGroup
		written  atomic.Int32
		dupes    atomic.Int32
		failures = make(chan error, n)
		start    = make(chan struct{})
	)
	for range n {
		wg.Go(func() {
			<-start
			res, err := s.Append(ctxFor(t), name, eventlog.Any(), []eventlog.EventData{ev})
			if err != nil {
				failures <- err
				return
			}
			if res.Duplicate {
				dupes.Add(1)
			} else {
				written.Add(1)
			}
			if res.FirstVersion != 1 {
				failures <- fmt.Errorf("copy got version %d, want 1", res.FirstVersion)
			}
		})
	}
	close(start)
	wg.Wait()
	close(failures)
	for err := range failures {
		t.Errorf("concurrent copy: %v", err)
	}
	assert.Equal(t, int32(1), written.Load(), "exactly one copy writes")
	assert.Equal(t, int32(n-1), dupes.Load(), "every other copy is a duplicate")
	recs, err := s.ReadStream(ctxFor(t), name)
	require.NoError(t, err)
	assert.Len(t, recs, 1)
}

func testConcurrentWriters(t *testing.T, s eventlog.Store) {
	name := stream(t, "writers")
	const writers, each = 8, 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	var conflicts atomic.Int32
	want := make([][]eventlog.EventData, writers)
	for w := range writers {
		want[w] = newEvents(each)
		wg.Go(func() {
			for _, ev := range want[w] {
				for {
					recs, err := s.ReadStream(context.Background(), name)
					if err != nil {
						errs <- err
						return
					}
					_, err = s.Append(context.Background(), name, eventlog.Exact(uint64(len(recs))), []eventlog.EventData{ev})
					if errors.Is(err, eventlog.ErrVersionConflict) {
						conflicts.Add(1)
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					break
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("writer: %v", err)
	}
	recs, err := s.ReadStream(ctxFor(t), name)
	require.NoError(t, err)
	require.Len(t, recs, writers*each, "no lost update")
	seen := map[eventlog.EventID]bool{}
	for i, r := range recs {
		assert.Equal(t, uint64(i+1), r.Version, "versions are gapless")
		assert.False(t, seen[r.ID], "event %s stored twice", r.ID)
		seen[r.ID] = true
	}
	for _, evs := range want {
		for _, ev := range evs {
			assert.True(t, seen[ev.ID], "event %s lost", ev.ID)
		}
	}
	t.Logf("%d version conflicts retried", conflicts.Load())
}

// readOwn reads the global log after from and keeps the events of the given streams.
func readOwn(t *testing.T, s eventlog.Store, from eventlog.Position, streams map[string]bool, want int) []eventlog.RecordedEvent {
	t.Helper()
	var out []eventlog.RecordedEvent
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < want && time.Now().Before(deadline) {
		batch, err := s.ReadAll(ctxFor(t), from, 500)
		require.NoError(t, err)
		for _, r := range batch {
			require.Equal(t, 1, r.Position.Compare(from), "ReadAll returned %s at or before %s", r.Position, from)
			from = r.Position
			if streams[r.StreamID] {
				out = append(out, r)
			}
		}
		if len(batch) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return out
}

func testReadAllFromPosition(t *testing.T, s eventlog.Store) {
	a, b := stream(t, "all-a"), stream(t, "all-b")
	own := map[string]bool{a: true, b: true}
	var appended []eventlog.EventID
	for i := range 4 {
		target := a
		if i%2 == 1 {
			target = b
		}
		evs := newEvents(2)
		mustAppend(t, s, target, eventlog.Any(), evs...)
		appended = append(appended, evs[0].ID, evs[1].ID)
	}
	all := readOwn(t, s, eventlog.Position{}, own, len(appended))
	require.Equal(t, appended, ids(all), "global order is append order for sequential appends")
	for i := 1; i < len(all); i++ {
		assert.Equal(t, 1, all[i].Position.Compare(all[i-1].Position), "positions strictly increase")
	}
	rest := readOwn(t, s, all[2].Position, own, len(appended)-3)
	assert.Equal(t, appended[3:], ids(rest), "reading from a position returns what follows it")

	limited, err := s.ReadAll(ctxFor(t), all[len(all)-1].Position, 10)
	require.NoError(t, err)
	for _, r := range limited {
		assert.False(t, own[r.StreamID], "nothing of ours after the last event")
	}
	// Seven of ours follow the first: a limit below that is filled.
	two, err := s.ReadAll(ctxFor(t), all[0].Position, 2)
	require.NoError(t, err)
	require.Len(t, two, 2, "a read returns up to its limit")
	for _, r := range two {
		assert.Equal(t, 1, r.Position.Compare(all[0].Position))
	}
}

// testConcurrentGlobalReader tails the global log while many writers commit concurrently: a reader
// that skipped an event whose transaction committed after a later position was visible would miss it.
func testConcurrentGlobalReader(t *testing.T, s eventlog.Store) {
	const writers, each = 8, 15
	own := map[string]bool{}
	streams := make([]string, writers)
	for i := range streams {
		streams[i] = stream(t, fmt.Sprintf("tail%d", i))
		own[streams[i]] = true
	}
	// Start after everything already in the store.
	var from eventlog.Position
	for {
		batch, err := s.ReadAll(ctxFor(t), from, 1000)
		require.NoError(t, err)
		if len(batch) == 0 {
			break
		}
		from = batch[len(batch)-1].Position
	}

	done := make(chan struct{})
	var wg sync.WaitGroup
	written := make(chan eventlog.EventID, writers*each)
	for w := range writers {
		wg.Go(func() {
			for range each {
				ev := newEvent("test.tail.v1")
				if _, err := s.Append(context.Background(), streams[w], eventlog.Any(), []eventlog.EventData{ev}); err != nil {
					t.Errorf("append: %v", err)
					return
				}
				written <- ev.ID
			}
		})
	}
	go func() { wg.Wait(); close(done) }()

	seen := map[eventlog.EventID]int{}
	pos := from
	tail := func() {
		batch, err := s.ReadAll(context.Background(), pos, 50)
		require.NoError(t, err)
		for _, r := range batch {
			require.Equal(t, 1, r.Position.Compare(pos), "position went backwards")
			pos = r.Position
			if own[r.StreamID] {
				seen[r.ID]++
			}
		}
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			tail()
		}
	}
	close(written)
	want := 0
	deadline := time.Now().Add(30 * time.Second)
	for id := range written {
		want++
		for seen[id] == 0 && time.Now().Before(deadline) {
			tail()
			if seen[id] == 0 {
				time.Sleep(5 * time.Millisecond)
			}
		}
		// An event committed before the reader passed its position must not be skipped forever.
		assert.Equal(t, 1, seen[id], "event %s seen %d times by the tailing reader", id, seen[id])
	}
	assert.Equal(t, writers*each, want)
}

func testSubscriptionCatchUp(t *testing.T, s eventlog.Store) {
	sub, ok := s.(eventlog.Subscriber)
	if !ok {
		t.Skip("store does not implement eventlog.Subscriber")
	}
	name := stream(t, "sub")
	// More than one read of the adapters' catch-up (500 events on PostgreSQL, 1,000 in memory).
	first := newEvents(1205)
	mustAppend(t, s, name, eventlog.NoStream(), first...)
	recs, err := s.ReadStream(ctxFor(t), name)
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	got := make(chan eventlog.RecordedEvent, 100)
	errc := make(chan error, 1)
	go func() {
		errc <- sub.Subscribe(ctx, recs[1].Position, func(r eventlog.RecordedEvent) error {
			if r.StreamID == name {
				got <- r
			}
			return nil
		})
	}()
	receive := func(n int) []eventlog.EventID {
		t.Helper()
		var out []eventlog.EventID
		timeout := time.After(20 * time.Second)
		for len(out) < n {
			select {
			case r := <-got:
				out = append(out, r.ID)
			case <-timeout:
				t.Fatalf("subscription delivered %d of %d events", len(out), n)
			}
		}
		return out
	}
	want := ids(recs[2:])
	assert.Equal(t, want, receive(len(want)), "catch-up starts after the given position, not live-only")

	live := newEvents(3)
	mustAppend(t, s, name, eventlog.Exact(uint64(len(first))), live...)
	assert.Equal(t, []eventlog.EventID{live[0].ID, live[1].ID, live[2].ID}, receive(3), "then follows live appends")

	cancel()
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("Subscribe did not return after its context ended")
	}
	select {
	case r := <-got:
		t.Fatalf("unexpected extra event %s", r.ID)
	default:
	}

}

// testCallersOwnTheirSlices: what a caller does with its slices after Append, or with the records a
// read returned, changes nothing stored.
func testCallersOwnTheirSlices(t *testing.T, s eventlog.Store) {
	name := stream(t, "own")
	events := newEvents(2)
	want := slices.Clone(events[0].Data)
	mustAppend(t, s, name, eventlog.NoStream(), events...)
	events[0].Data[0] = 'X'

	recs, err := s.ReadStream(ctxFor(t), name)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, want, recs[0].Data, "the store keeps its own copy of the appended bytes")
	wantMeta := slices.Clone(recs[1].Metadata)
	require.NotEmpty(t, wantMeta)
	recs[0].Data[0] = 'Y' // a caller decoding in place
	recs[1].Metadata[0] = 'Y'
	recs[0] = eventlog.RecordedEvent{Type: "changed.v1"}
	all, err := s.ReadAll(ctxFor(t), eventlog.Position{}, 1000)
	require.NoError(t, err)
	for i := range all {
		if len(all[i].Data) > 0 {
			all[i].Data[0] = 'Z'
		}
		all[i] = eventlog.RecordedEvent{Type: "changed.v1"}
	}

	again, err := s.ReadStream(ctxFor(t), name)
	require.NoError(t, err)
	assert.Equal(t, []eventlog.EventID{events[0].ID, events[1].ID}, ids(again))
	assert.Equal(t, events[0].Type, again[0].Type)
	assert.Equal(t, want, again[0].Data, "a read's bytes are the caller's")
	assert.Equal(t, wantMeta, again[1].Metadata, "a read's bytes are the caller's")
	after, err := s.ReadAll(ctxFor(t), eventlog.Position{}, 1000)
	require.NoError(t, err)
	for _, r := range after {
		assert.NotEqual(t, "changed.v1", r.Type)
	}
}
