package steps

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
)

// The key is UUIDv5 (RFC 9562) over the namespace and the name, as github.com/google/uuid's NewSHA1
// computed it when keys were first stored: a stored key is found again.
func TestStepKeyIsTheStoredUUIDv5(t *testing.T) {
	assert.Equal(t, "7671e318-3939-5b70-a218-62ac7bd5df9a", StepKey("calendly-t1", CalendarCreate, "active 2030-01-07T09:00:00Z–2030-01-07T09:30:00Z").String())
	assert.Equal(t, "5481d905-285c-54f2-8090-60351f77438a", SeatStepKey("calcom-s1", "seat-a").String())
	assert.Equal(t, "6f1d3c9e-5b8a-4f57-9a53-0b4c8e1f2d7a", namespace.String())
}

// rowsOf reads rows in rounds as a batch does: want, then what they link to, until nothing is new.
func rowsOf(calendar map[string]Row, want ...string) Rows {
	rows := Rows{}
	add := func(ids []string) {
		missing := rows.Missing(ids)
		var read []Row
		for _, id := range missing {
			if r, ok := calendar[id]; ok {
				read = append(read, r)
			}
		}
		rows.Add(missing, read)
	}
	add(want)
	for before := -1; before != len(rows); {
		before = len(rows)
		add(rows.Chained())
	}
	return rows
}

func TestRowsReadEachBookingOnce(t *testing.T) {
	rows := Rows{}
	require.Equal(t, []string{"a", "b"}, rows.Missing([]string{"a", "", "b", "a"}))
	rows.Add([]string{"a", "b"}, []Row{{Booking: Booking{ID: "a", Status: "active"}, Series: "s1"}})
	assert.Equal(t, Row{Booking: Booking{ID: "b"}}, rows["b"], "a booking the calendar has no row for has its ID only")
	assert.Empty(t, rows.Missing([]string{"a", "b"}))
	assert.Equal(t, []string{"s1"}, rows.Series([]string{"a", "b", "a"}))
}

// A reschedule chain is one thread from its root, whichever of its bookings the batch touched; the
// thread keeps the name its first step has, and plans from its latest booking.
func TestThreadsFollowRescheduleChains(t *testing.T) {
	t1 := time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
	calendar := map[string]Row{
		"p5": {Booking: Booking{ID: "p5", Status: "canceled"}, To: "p6"},
		"p6": {Booking: Booking{ID: "p6", Status: "canceled"}, From: "p5", To: "p7"},
		"p7": {Booking: Booking{ID: "p7", Status: "active", Resources: []string{"host"}, Start: t1, End: t1.Add(30 * time.Minute)}, From: "p6"},
		"q1": {Booking: Booking{ID: "q1", Status: "conflict"}},
	}
	rows := rowsOf(calendar, "p6", "q1")
	threads := rows.Threads()
	require.Equal(t, []Thread{{"p5", "p6", "p7"}, {"q1"}}, threads)
	assert.Equal(t, []string{"p5", "p6", "p7", "q1"}, Members(threads))

	assert.Equal(t, "p5", threads[0].Name(nil), "a thread without steps is named after its root")
	existing := []Step{{Thread: "p6", Booking: "p6", Kind: EmailConfirmation, State: StateDone}, {Thread: "q1", Booking: "q1"}}
	assert.Equal(t, "p6", threads[0].Name(existing), "a chain that grew at its start keeps the thread it began with")
	assert.Equal(t, existing[:1], threads[0].Steps(existing))

	plans := PlanThreads(threads, rows, existing, Targets{Email: true})
	require.Len(t, plans, 2)
	require.Len(t, plans[0].Insert, 1)
	assert.Equal(t, EmailRescheduled, plans[0].Insert[0].Kind)
	assert.Equal(t, "p6", plans[0].Insert[0].Thread)
	assert.Equal(t, "p7", plans[0].Insert[0].Booking, "the latest booking's")
	assert.Empty(t, plans[1].Insert, "a booking in conflict gets nothing")
}

func TestTouchedAreTheBookingStreams(t *testing.T) {
	events := []eventlog.RecordedEvent{{StreamID: booking.ID("calendly-a").Stream()}, {StreamID: "not-a-booking"},
		{StreamID: booking.ID("calendly-b").Stream()}, {StreamID: booking.ID("calendly-a").Stream()}}
	assert.Equal(t, []string{"calendly-a", "calendly-b"}, Touched(events))
}

// Each seat that left a seated booking (its fold took the removal: Booking.Left) gets one
// cancellation, keyed by booking and seat, at the booking's slot, whatever batch is applied; a seat
// the fold has not leaving, a booking not seated, with no calendar row or with a row computed before
// its seats that left were kept gets none; planned steps are not planned again, and a pending one
// whose seat no longer left is skipped.
func TestSeatCancellationsOnePerLeaving(t *testing.T) {
	t1 := time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
	rows := Rows{
		"calcom-s": {Booking: Booking{ID: "calcom-s", Resources: []string{"host"}, Start: t1, End: t1.Add(time.Hour), Seated: true,
			Seats: []string{"seat-b"}, Left: []string{"seat-a", "seat-a"}, LeftKnown: true}},
		"calcom-old":   {Booking: Booking{ID: "calcom-old", Seated: true, Seats: []string{"seat-c"}}},
		"calcom-plain": {Booking: Booking{ID: "calcom-plain", Left: []string{"seat-d"}, LeftKnown: true}},
	}
	rows.Add([]string{"calcom-gone"}, nil)
	got := SeatCancellations(rows, nil)
	require.Len(t, got.Insert, 1, "seat-a once; none for a row without seats that left, a booking not seated, or no row")
	assert.Empty(t, got.Skip)
	assert.Equal(t, Step{Key: SeatStepKey("calcom-s", "seat-a"), Kind: EmailSeatCancellation, Thread: "calcom-s", Booking: "calcom-s",
		State: StatePending, Answers: "seat seat-a left", Resource: "host", Seat: "seat-a", Start: t1, End: t1.Add(time.Hour)}, got.Insert[0])

	assert.Empty(t, SeatCancellations(rows, got.Insert).Insert, "re-planning finds the key")
	gone := rows["calcom-s"]
	gone.Left = nil
	rows["calcom-s"] = gone
	again := SeatCancellations(rows, got.Insert)
	assert.Empty(t, again.Insert)
	require.Len(t, again.Skip, 1, "the seat no longer left: its pending email is skipped")
	assert.Equal(t, got.Insert[0].Key, again.Skip[0].Key)
	done := got.Insert[0]
	done.State = StateDone
	assert.Empty(t, SeatCancellations(rows, []Step{done}).Skip, "an effected one stays")
}
