package postgres

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/eventlog"
)

// TestTailKeepsWhatAReadFromThereReturns: the shared tail answers a follower at any position it
// keeps with the events after it, a follower before what it keeps (or at no event's position) with
// "read on your own", and one beyond it with nothing yet — also after it dropped its oldest events.
func TestTailKeepsWhatAReadFromThereReturns(t *testing.T) {
	t.Parallel()
	at := func(n uint64) eventlog.Position { return eventlog.Position{Commit: n, Prepare: n} }
	evs := func(ns ...uint64) []eventlog.RecordedEvent {
		out := make([]eventlog.RecordedEvent, len(ns))
		for i, n := range ns {
			out[i] = eventlog.RecordedEvent{Position: at(n)}
		}
		return out
	}
	positions := func(es []eventlog.RecordedEvent) []uint64 {
		out := []uint64{}
		for _, e := range es {
			out = append(out, e.Position.Commit)
		}
		return out
	}
	tl := &tail{keep: 3, changed: make(chan struct{})}
	_, cancel := context.WithCancel(context.Background())
	defer cancel()
	tl.stop, tl.gen, tl.base = cancel, 1, at(10)

	require.True(t, tl.add(1, evs(12, 14)))
	require.False(t, tl.add(2, evs(16)), "a reader that is not the current one")
	for _, c := range []struct {
		from uint64
		want []uint64
		ok   bool
	}{{8, nil, false}, {10, []uint64{12, 14}, true}, {12, []uint64{14}, true}, {13, nil, false}, {14, []uint64{}, true}, {20, []uint64{}, true}} {
		got, ok := tl.after(at(c.from))
		assert.Equal(t, c.ok, ok, "from %d", c.from)
		if ok {
			assert.Equal(t, c.want, positions(got), "from %d", c.from)
		}
	}

	changed := tl.changed
	require.True(t, tl.add(1, evs(16, 18)))
	select {
	case <-changed:
	default:
		t.Fatal("followers were not woken")
	}
	assert.Equal(t, at(12), tl.base, "two of five dropped: the last dropped is the new base")
	assert.Equal(t, []uint64{14, 16, 18}, positions(tl.events))
	for _, c := range []struct {
		from uint64
		want []uint64
		ok   bool
	}{{10, nil, false}, {12, []uint64{14, 16, 18}, true}, {14, []uint64{16, 18}, true}, {18, []uint64{}, true}} {
		got, ok := tl.after(at(c.from))
		assert.Equal(t, c.ok, ok, "from %d", c.from)
		if ok {
			assert.Equal(t, c.want, positions(got), "from %d", c.from)
		}
	}
	assert.Equal(t, at(18), tl.end())
}
