package calendar_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
	"bookingledger/projections/calendar"
)

// series is four weekly occurrences of one Cal.com series and their events: occurrence i starts
// i weeks after t0 (in minutes, at), created a day before t0; the series cancel ("all remaining",
// asked on the second occurrence) is stamped at cancelMin.
func series(cancelMin int, withLink bool) map[booking.ID][]booking.Event {
	out := map[booking.ID][]booking.Event{}
	week := 7 * 24 * 60
	for i := range 4 {
		id := booking.ID(fmt.Sprintf("calcom-occ%d", i+1))
		evs := []booking.Event{ev(id, 1, -24*60, booking.Scheduled{Slot: at(string(id), i*week, i*week+30), Capacity: 1})}
		if withLink || i != 1 {
			evs = append(evs, ev(id, 2, -24*60, booking.SeriesJoined{Series: "calcom-series-r1"}))
		}
		out[id] = evs
	}
	out["calcom-occ2"] = append(out["calcom-occ2"],
		ev("calcom-occ2", 3, cancelMin, booking.Canceled{Reason: "project paused", CanceledBy: "host"}),
		ev("calcom-occ2", 4, cancelMin, booking.SeriesCanceled{CanceledBy: "host"}))
	return out
}

func recompute(events map[booking.ID][]booking.Event, order []booking.ID, given []calendar.SeriesCancel) map[booking.ID]calendar.Booking {
	var c calendar.Component
	for _, id := range order {
		in := input(events[id]...)
		in.StreamVersion = uint64(len(booking.Sorted(events[id]))) // redeliveries are not stored twice
		c.Bookings = append(c.Bookings, in)
	}
	c.SeriesCancels = given
	out := map[booking.ID]calendar.Booking{}
	for _, r := range calendar.Recompute(c).Rows {
		out[r.Booking] = r
	}
	return out
}

// TestSeriesCancelAllRemaining: a cancel of all remaining occurrences, asked on the second of four
// after the first took place, cancels the second, third and fourth explicitly ("canceled with the
// series") and leaves the first; in any order of the occurrences, with any of them recomputed alone
// against the series cancels of the others (what the read model's loaders pass).
func TestSeriesCancelAllRemaining(t *testing.T) {
	cancelAt := 2 * 24 * 60 // after the first occurrence, before the second
	evs := series(cancelAt, true)
	ids := []booking.ID{"calcom-occ1", "calcom-occ2", "calcom-occ3", "calcom-occ4"}
	want := recompute(evs, ids, nil)

	assert.Equal(t, calendar.StatusActive, want["calcom-occ1"].Status, "an occurrence before the cancel stays")
	assert.Equal(t, calendar.StatusCanceled, want["calcom-occ2"].Status)
	assert.Equal(t, "project paused", want["calcom-occ2"].CancelReason, "the occurrence asked on has its own cancel")
	for _, id := range ids[2:] {
		r := want[id]
		assert.Equal(t, calendar.StatusCanceled, r.Status, id)
		assert.True(t, r.CancelImplied, id)
		assert.Equal(t, "host", r.CanceledBy, id)
		assert.Contains(t, r.CancelReason, "canceled with the series calcom-series-r1", id)
		assert.Contains(t, r.CancelReason, "calcom-occ2 at "+t0.Add(time.Duration(cancelAt)*time.Minute).UTC().Format(time.RFC3339Nano), id)
		assert.False(t, r.Claims(), "%s releases its slot", id)
		assert.Equal(t, "calcom-series-r1", r.Series)
	}

	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 35))
	sc, ok := calendar.SeriesCancelOf("calcom-occ2", booking.Fold(evs["calcom-occ2"]))
	require.True(t, ok)
	for range 50 {
		order := append([]booking.ID(nil), ids...)
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		// Redeliveries: events given twice fold once.
		dup := map[booking.ID][]booking.Event{}
		for id, e := range evs {
			dup[id] = append(append([]booking.Event(nil), e...), e[r.IntN(len(e))])
			r.Shuffle(len(dup[id]), func(i, j int) { dup[id][i], dup[id][j] = dup[id][j], dup[id][i] })
		}
		assert.Equal(t, want, recompute(dup, order, nil))
		// One occurrence alone, the cancel of the series given: its row is the whole set's.
		alone := order[0]
		got := recompute(dup, []booking.ID{alone}, []calendar.SeriesCancel{sc})
		assert.Equal(t, want[alone], got[alone], "%s recomputed alone", alone)
	}
}

// TestSeriesCancelWithoutTheSeriesCancelsOneOccurrence: when no event of the canceled occurrence names
// its series, the others stay, and the occurrence's finding opens an item that says so.
func TestSeriesCancelWithoutTheSeriesCancelsOneOccurrence(t *testing.T) {
	evs := series(2*24*60, false)
	ids := []booking.ID{"calcom-occ1", "calcom-occ2", "calcom-occ3", "calcom-occ4"}
	var c calendar.Component
	for _, id := range ids {
		c.Bookings = append(c.Bookings, input(evs[id]...))
	}
	ch := calendar.Recompute(c)
	rows := ch.Rows
	assert.Equal(t, calendar.StatusCanceled, rowOf(t, rows, "calcom-occ2").Status)
	for _, id := range []booking.ID{"calcom-occ1", "calcom-occ3", "calcom-occ4"} {
		assert.Equal(t, calendar.StatusActive, rowOf(t, rows, id).Status, id)
	}
	require.Len(t, ch.Items.Open, 1)
	assert.Equal(t, booking.ID("calcom-occ2"), ch.Items.Open[0].Booking)
	assert.Contains(t, ch.Items.Open[0].Reason, "series_unknown")
}
