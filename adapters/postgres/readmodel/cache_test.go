package readmodel

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
)

// A stream's duplicates are dropped whether it is small (found by scanning) or has grown past
// smallStream (found in its map), and across the switch from one to the other.
func TestStreamCacheDropsDuplicates(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, smallStream - 1, smallStream, smallStream + 1, 3 * smallStream} {
		t.Run(fmt.Sprintf("%d events", n), func(t *testing.T) {
			c := newStreamCache(1_000_000)
			c.put("booking-b", nil, nil)
			ev := func(i int) booking.Event {
				var id eventlog.EventID
				id[0], id[15] = byte(i>>8), byte(i)
				return booking.Event{ID: id, Booking: "b"}
			}
			for i := range n {
				c.observe("booking-b", uint64(i+1), ev(i))
				for j := range i + 1 { // every earlier event again, delivered a second time
					c.observe("booking-b", uint64(j+1), ev(j))
				}
			}
			c.put("booking-b", []uint64{1, uint64(n + 1)}, []booking.Event{ev(0), ev(n)})
			got, ok := c.get("booking-b")
			require.True(t, ok)
			require.Len(t, got.events, n+1)
			for i, e := range got.events {
				assert.Equal(t, ev(i).ID, e.ID)
			}
			assert.Equal(t, uint64(n+1), got.version)
			assert.Equal(t, n+1, c.size)
		})
	}
}

// A stream whose first event the log delivers is held from the log alone; a stream first seen later
// in its life is not (its earlier events must be read from the store).
func TestStreamCacheStartsAtTheFirstEvent(t *testing.T) {
	t.Parallel()
	c := newStreamCache(1_000_000)
	ev := func(i byte) booking.Event { return booking.Event{ID: eventlog.EventID{i}, Booking: "b"} }
	c.observe("booking-new", 1, ev(1))
	c.observe("booking-new", 2, ev(2))
	c.observe("booking-old", 3, ev(3))
	got, ok := c.get("booking-new")
	require.True(t, ok, "a stream starting in the log is cached")
	assert.Equal(t, []booking.Event{ev(1), ev(2)}, got.events)
	assert.Equal(t, uint64(2), got.version)
	_, ok = c.get("booking-old")
	assert.False(t, ok, "a stream first seen at version 3 needs its first two events from the store")
	assert.Equal(t, 2, c.size)
}
