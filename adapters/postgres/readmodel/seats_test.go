package readmodel_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
	"bookingledger/projections/calendar"
)

// Seated Cal.com bookings (issue #35): one booking, several attendees; a seat leaving is not the
// booking canceled.

const seatHost = "calcom-user-1842"

func seatOf(n int) booking.Seat {
	return booking.Seat{UID: fmt.Sprintf("seat-%d", n), Attendee: fmt.Sprintf("email-sha256:%016x", n)}
}

func seatAdded(b booking.ID, n, capacity int, occurred time.Time) delivery {
	return one(fmt.Sprintf("%s/seat-%d", b, n), event(b, fmt.Sprintf("seat-%d", n), occurred,
		booking.SeatAdded{Slot: slot(string(b)+"@Cal.com", at(16, 0), 60, seatHost), Capacity: capacity, Seat: seatOf(n)}))
}

func seatLeft(b booking.ID, n int, occurred time.Time) delivery {
	// The leaver's cancel carries the attendee, not always the seat reference.
	return one(fmt.Sprintf("%s/seat-%d-left", b, n), event(b, fmt.Sprintf("seat-%d-left", n), occurred,
		booking.SeatRemoved{Seat: booking.Seat{Attendee: seatOf(n).Attendee}, Reason: "train strike"}))
}

// convergeOver records ds in orders random arrival orders (shuffled, with redeliveries and the same
// events under another delivery id), projecting at random points; each run's rebuild must equal its
// incremental result (recordAndProject), and every run must equal the first.
func convergeOver(t *testing.T, ds []delivery, orders int) snapshot {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	got := runsInParallel(t, orders, func(t *testing.T, run int) snapshot {
		r := rand.New(rand.NewPCG(seed, uint64(run)))
		return recordAndProject(t, r, arrival(r, ds))
	})
	for run := 1; run < orders; run++ {
		require.Equal(t, got[0], got[run], "run %d differs from run 0", run)
	}
	return got[0]
}

// runsInParallel runs run(0) … run(n-1) as parallel subtests, each on a database of its own, and
// returns their results once all have ended; it ends the test when one of them failed.
func runsInParallel(t *testing.T, n int, run func(t *testing.T, run int) snapshot) []snapshot {
	t.Helper()
	got := make([]snapshot, n)
	var skipped atomic.Bool
	t.Run("runs", func(t *testing.T) {
		for i := range n {
			t.Run(fmt.Sprintf("run=%d", i), func(t *testing.T) {
				t.Parallel()
				defer func() { skipped.CompareAndSwap(false, t.Skipped()) }()
				got[i] = run(t, i)
			})
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	if skipped.Load() {
		t.Skip("a run was skipped (above: what it needs)")
	}
	return got
}

func rowOf(t *testing.T, s snapshot, id booking.ID) calendar.Booking {
	t.Helper()
	for _, b := range s.Bookings {
		if b.Booking == id {
			return b
		}
	}
	require.Failf(t, "no row", "booking %s", id)
	return calendar.Booking{}
}

func openOf(s snapshot, prefix string) []string {
	var out []string
	for _, o := range s.Open {
		if strings.HasPrefix(o, prefix) {
			out = append(out, o)
		}
	}
	return out
}

// TestSeatsUnderAnyArrival: three seats, one leaves, a new attendee retakes the seat; a 1:1 booking
// of the same host at the same time, made while one seat was free, is a conflict, not a second
// active booking. Any order, with redeliveries; rebuild equals incremental.
func TestSeatsUnderAnyArrival(t *testing.T) {
	t.Parallel()
	seated, single := booking.ID("calcom-seated"), booking.ID("calcom-single")
	ds := []delivery{
		seatAdded(seated, 1, 3, at(-72, 0)),
		seatAdded(seated, 2, 3, at(-71, 0)),
		seatAdded(seated, 3, 3, at(-70, 0)),
		seatLeft(seated, 2, at(-60, 0)),
		one(string(single)+"/created", created(single, at(-50, 0), slot(string(single)+"@Cal.com", at(16, 30), 30, seatHost))),
		seatAdded(seated, 4, 3, at(-40, 0)),
	}
	s := convergeOver(t, ds, 6)

	row := rowOf(t, s, seated)
	assert.Equal(t, calendar.StatusActive, row.Status, "one attendee leaving is not the booking canceled")
	assert.True(t, row.Holder)
	assert.Empty(t, row.Findings, "the retaken seat is not refused as late")
	assert.Equal(t, calendar.StatusConflict, rowOf(t, s, single).Status, "the 1:1 booking does not silently double-book the host")
	assert.Empty(t, openOf(s, "late_event"))
	require.Len(t, openOf(s, "conflict"), 1)
	assert.Contains(t, openOf(s, "conflict")[0], "conflict|calcom-single calcom-seated|")
	assert.Len(t, s.Slots, 2, "one slot row each")
}

// TestLastSeatLeavingCancelsUnderAnyArrival: when every attendee left, the booking is canceled and the
// 1:1 booking takes the slot.
func TestLastSeatLeavingCancelsUnderAnyArrival(t *testing.T) {
	t.Parallel()
	seated, single := booking.ID("calcom-seated"), booking.ID("calcom-single")
	ds := []delivery{
		seatAdded(seated, 1, 3, at(-72, 0)),
		seatAdded(seated, 2, 3, at(-71, 0)),
		seatLeft(seated, 1, at(-60, 0)),
		one(string(single)+"/created", created(single, at(-55, 0), slot(string(single)+"@Cal.com", at(16, 30), 30, seatHost))),
		seatLeft(seated, 2, at(-50, 0)),
	}
	s := convergeOver(t, ds, 4)
	row := rowOf(t, s, seated)
	assert.Equal(t, calendar.StatusCanceled, row.Status)
	assert.Equal(t, "the last attendee left", row.CancelReason)
	assert.Equal(t, calendar.StatusActive, rowOf(t, s, single).Status)
	assert.Empty(t, s.Open)
}

// TestOverCapacityUnderAnyArrival: a fourth seat of three is kept, the slot held once, and an item
// says "seat 4 of capacity 3".
func TestOverCapacityUnderAnyArrival(t *testing.T) {
	t.Parallel()
	seated := booking.ID("calcom-seated")
	ds := []delivery{
		seatAdded(seated, 1, 3, at(-72, 0)),
		seatAdded(seated, 2, 3, at(-71, 0)),
		seatAdded(seated, 3, 3, at(-70, 0)),
		seatAdded(seated, 4, 3, at(-69, 0)),
	}
	s := convergeOver(t, ds, 4)
	row := rowOf(t, s, seated)
	assert.Equal(t, calendar.StatusActive, row.Status)
	assert.True(t, row.Holder)
	require.Len(t, s.Slots, 1, "the slot is held once")
	items := openOf(s, "late_event")
	require.Len(t, items, 1)
	assert.Contains(t, items[0], "seat 4 of capacity 3")
	assert.Contains(t, items[0], "over_capacity")
}

// TestSeriesCancelUnderAnyArrival: a four-occurrence series; Cal.com's "cancel all remaining", asked
// on the second occurrence after the first took place, arrives as one webhook for the second. The
// second, third and fourth are canceled — the later two "with the series" — and the first stays;
// another booking of the host at the third occurrence's time then takes the slot. Any order, with
// redeliveries; rebuild (whole and in chunks of a few bookings, which puts occurrences in different
// chunks) equals incremental.
func TestSeriesCancelUnderAnyArrival(t *testing.T) {
	t.Parallel()
	week := 7 * 24 * time.Hour
	var ds []delivery
	for i := range 4 {
		id := booking.ID(fmt.Sprintf("calcom-occ%d", i+1))
		ds = append(ds, delivery{ID: string(id) + "/BOOKING_CREATED", Provider: "calcom", Events: []booking.Event{
			event(id, "created", at(-96, 0), booking.Scheduled{Slot: slot(string(id)+"@Cal.com", at(9, 0).Add(time.Duration(i)*week), 30, seatHost), Capacity: 1}),
			event(id, "series", at(-96, 0), booking.SeriesJoined{Series: "calcom-series-r1"}),
		}})
	}
	cancelAt := at(12, 0) // after the first occurrence
	ds = append(ds, delivery{ID: "calcom-occ2/BOOKING_CANCELLED", Provider: "calcom", Events: []booking.Event{
		event("calcom-occ2", "canceled", cancelAt, booking.Canceled{Reason: "project paused", CanceledBy: "host"}),
		event("calcom-occ2", "series-cancel", cancelAt, booking.SeriesCanceled{CanceledBy: "host"}),
	}})
	other := booking.ID("calendly-other")
	ds = append(ds, one(string(other)+"/created", created(other, at(13, 0), slot("other", at(9, 0).Add(2*week), 30, seatHost))))
	s := convergeOver(t, ds, 6)

	assert.Equal(t, calendar.StatusActive, rowOf(t, s, "calcom-occ1").Status)
	assert.Equal(t, calendar.StatusCanceled, rowOf(t, s, "calcom-occ2").Status)
	for _, id := range []booking.ID{"calcom-occ3", "calcom-occ4"} {
		r := rowOf(t, s, id)
		assert.Equal(t, calendar.StatusCanceled, r.Status, id)
		assert.True(t, r.CancelImplied, id)
		assert.Equal(t, "host", r.CanceledBy, id)
		assert.Contains(t, r.CancelReason, "canceled with the series calcom-series-r1", id)
		assert.Contains(t, r.CancelReason, "calcom-occ2 at "+cancelAt.UTC().Format(time.RFC3339Nano), id)
		assert.Equal(t, "calcom-series-r1", r.Series, id)
	}
	assert.Equal(t, calendar.StatusActive, rowOf(t, s, other).Status, "the freed slot is taken")
	assert.Empty(t, s.Open)

	// History of a later occurrence says so.
	e := newEnv(t)
	for _, d := range ds {
		e.deliver(t, d)
	}
	e.catchUp(t)
	h, err := e.rm.History(context.Background(), "calcom-occ4")
	require.NoError(t, err)
	assert.Contains(t, h.State.CancelReason, "canceled with the series")
}

// TestSeriesCancelWithoutTheSeriesIsAnItem: the payload of the canceled occurrence's create named no
// series: only it is canceled, and an item says which occurrences are meant is unknown.
func TestSeriesCancelWithoutTheSeriesIsAnItem(t *testing.T) {
	t.Parallel()
	ds := []delivery{
		one("calcom-occ1/BOOKING_CREATED", event("calcom-occ1", "created", at(-96, 0), booking.Scheduled{Slot: slot("occ1", at(9, 0), 30, seatHost), Capacity: 1})),
		one("calcom-occ2/BOOKING_CREATED", event("calcom-occ2", "created", at(-96, 0), booking.Scheduled{Slot: slot("occ2", at(9, 0).Add(7*24*time.Hour), 30, seatHost), Capacity: 1})),
		{ID: "calcom-occ2/BOOKING_CANCELLED", Provider: "calcom", Events: []booking.Event{
			event("calcom-occ2", "canceled", at(12, 0), booking.Canceled{CanceledBy: "host"}),
			event("calcom-occ2", "series-cancel", at(12, 0), booking.SeriesCanceled{CanceledBy: "host"}),
		}},
	}
	s := convergeOver(t, ds, 3)
	assert.Equal(t, calendar.StatusCanceled, rowOf(t, s, "calcom-occ2").Status)
	assert.Equal(t, calendar.StatusActive, rowOf(t, s, "calcom-occ1").Status)
	items := openOf(s, "late_event")
	require.Len(t, items, 1)
	assert.Contains(t, items[0], "series_unknown")
}
