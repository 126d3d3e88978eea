package booking_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
)

func seatOf(n int) booking.Seat {
	return booking.Seat{UID: fmt.Sprintf("seat-%d", n), Attendee: fmt.Sprintf("email-sha256:%016x", n)}
}

func addSeat(id byte, at time.Duration, n, capacity int) booking.Event {
	return ev(id, at, booking.SeatAdded{Slot: slot(1), Capacity: capacity, Seat: seatOf(n)})
}

func removeSeat(id byte, at time.Duration, seat booking.Seat) booking.Event {
	return ev(id, at, booking.SeatRemoved{Seat: seat})
}

func TestSeats(t *testing.T) {
	byAttendee := func(n int) booking.Seat { return booking.Seat{Attendee: seatOf(n).Attendee} }
	cases := []struct {
		name     string
		events   []booking.Event
		status   booking.Status
		seats    []booking.Seat
		findings []booking.FindingCode
		reason   string
	}{
		{
			name:   "three seats, one leaves: the others keep the booking",
			events: []booking.Event{addSeat(1, 0, 1, 3), addSeat(2, time.Minute, 2, 3), addSeat(3, 2*time.Minute, 3, 3), removeSeat(4, 3*time.Minute, seatOf(2))},
			status: booking.StatusActive,
			seats:  []booking.Seat{seatOf(1), seatOf(3)},
		},
		{
			name: "the leaver's seat is retaken by a new attendee",
			events: []booking.Event{addSeat(1, 0, 1, 3), addSeat(2, time.Minute, 2, 3), addSeat(3, 2*time.Minute, 3, 3),
				removeSeat(4, 3*time.Minute, seatOf(2)), addSeat(5, 4*time.Minute, 4, 3)},
			status: booking.StatusActive,
			seats:  []booking.Seat{seatOf(1), seatOf(3), seatOf(4)},
		},
		{
			name:   "a removal without seat reference matches by attendee key",
			events: []booking.Event{addSeat(1, 0, 1, 3), addSeat(2, time.Minute, 2, 3), removeSeat(3, 2*time.Minute, byAttendee(1))},
			status: booking.StatusActive,
			seats:  []booking.Seat{seatOf(2)},
		},
		{
			name:   "the last attendee leaving cancels the booking",
			events: []booking.Event{addSeat(1, 0, 1, 3), addSeat(2, time.Minute, 2, 3), removeSeat(3, 2*time.Minute, seatOf(1)), removeSeat(4, 3*time.Minute, seatOf(2))},
			status: booking.StatusCanceled,
			reason: "the last attendee left",
		},
		{
			name:     "the organizer's cancel ends the booking for every attendee",
			events:   []booking.Event{addSeat(1, 0, 1, 3), addSeat(2, time.Minute, 2, 3), ev(3, 2*time.Minute, booking.Canceled{Reason: "host away", CanceledBy: "host"}), addSeat(4, 3*time.Minute, 3, 3)},
			status:   booking.StatusCanceled,
			seats:    []booking.Seat{seatOf(1), seatOf(2)},
			findings: []booking.FindingCode{booking.FindingAfterTerminal},
			reason:   "host away",
		},
		{
			name:     "a seat over capacity is kept and found",
			events:   []booking.Event{addSeat(1, 0, 1, 2), addSeat(2, time.Minute, 2, 2), addSeat(3, 2*time.Minute, 3, 2)},
			status:   booking.StatusActive,
			seats:    []booking.Seat{seatOf(1), seatOf(2), seatOf(3)},
			findings: []booking.FindingCode{booking.FindingOverCapacity},
		},
		{
			name:     "a removal of nobody changes nothing and is found",
			events:   []booking.Event{addSeat(1, 0, 1, 3), removeSeat(2, time.Minute, seatOf(9))},
			status:   booking.StatusActive,
			seats:    []booking.Seat{seatOf(1)},
			findings: []booking.FindingCode{booking.FindingUnknownSeat},
		},
		{
			name: "seats recorded as Scheduled before seat events existed count by number",
			events: []booking.Event{ev(1, 0, booking.Scheduled{Slot: slot(1), Capacity: 3}), ev(2, time.Minute, booking.Scheduled{Slot: slot(1), Capacity: 3}),
				removeSeat(3, 2*time.Minute, seatOf(1))},
			status: booking.StatusActive,
			seats:  []booking.Seat{{}},
		},
		{
			name:   "the same attendee's seat create twice is one seat",
			events: []booking.Event{addSeat(1, 0, 1, 3), addSeat(2, time.Minute, 1, 3), removeSeat(3, 2*time.Minute, seatOf(1))},
			status: booking.StatusCanceled, findings: []booking.FindingCode{booking.FindingSuperseded},
			reason: "the last attendee left",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := booking.Fold(tc.events)
			assert.Equal(t, tc.status, s.Status)
			assert.Equal(t, tc.seats, s.Seats)
			var codes []booking.FindingCode
			for _, f := range s.Findings {
				codes = append(codes, f.Code)
			}
			assert.Equal(t, tc.findings, codes)
			if tc.reason != "" {
				assert.Equal(t, tc.reason, s.CancelReason)
			}
		})
	}
}

func TestOverCapacityFindingSaysWhichSeat(t *testing.T) {
	s := booking.Fold([]booking.Event{addSeat(1, 0, 1, 2), addSeat(2, time.Minute, 2, 2), addSeat(3, 2*time.Minute, 3, 2)})
	require.Len(t, s.Findings, 1)
	assert.Contains(t, s.Findings[0].Reason, "seat 3 of capacity 2")
	assert.Equal(t, booking.TypeSeatAdded, s.Findings[0].Type)
}

// TestSeatsConvergeUnderAnyArrival: three seats, one leaves, a new attendee retakes the seat; and the
// same with the organizer's cancel and with a seat over capacity — every arrival order, with
// redeliveries, folds to one state.
func TestSeatsConvergeUnderAnyArrival(t *testing.T) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 35))
	sets := map[string][]booking.Event{
		"leave and retake": {addSeat(1, 0, 1, 3), addSeat(2, time.Minute, 2, 3), addSeat(3, 2*time.Minute, 3, 3),
			removeSeat(4, 3*time.Minute, seatOf(2)), addSeat(5, 4*time.Minute, 4, 3)},
		"all leave": {addSeat(1, 0, 1, 3), addSeat(2, time.Minute, 2, 3), removeSeat(3, 2*time.Minute, seatOf(1)),
			removeSeat(4, 3*time.Minute, booking.Seat{Attendee: seatOf(2).Attendee}), addSeat(5, 4*time.Minute, 3, 3)},
		"over capacity":    {addSeat(1, 0, 1, 2), addSeat(2, 0, 2, 2), addSeat(3, 0, 3, 2), removeSeat(4, time.Minute, seatOf(1)), addSeat(5, 2*time.Minute, 4, 2)},
		"same millisecond": {addSeat(1, 0, 1, 3), addSeat(2, 0, 2, 3), removeSeat(3, 0, seatOf(2)), addSeat(4, 0, 2, 3)},
	}
	for name, events := range sets {
		t.Run(name, func(t *testing.T) {
			want := booking.Fold(events)
			permutations(events, func(order []booking.Event) {
				got := booking.Fold(withDuplicates(r, order))
				if !assert.Equal(t, want, got, "order %v", ids(order)) {
					t.FailNow()
				}
			})
		})
	}
	assert.Equal(t, booking.StatusActive, booking.Fold(sets["leave and retake"]).Status)
	assert.Len(t, booking.Fold(sets["leave and retake"]).Seats, 3)
	assert.Equal(t, booking.StatusCanceled, booking.Fold(sets["all leave"]).Status)
}

func TestSeriesLink(t *testing.T) {
	s := booking.Fold([]booking.Event{
		ev(1, 0, booking.Scheduled{Slot: slot(1)}), ev(2, 0, booking.SeriesJoined{Series: "rec-1"}),
		ev(3, time.Hour, booking.Canceled{Reason: "moving"}), ev(4, time.Hour, booking.SeriesCanceled{CanceledBy: "host"}),
	})
	assert.Equal(t, booking.StatusCanceled, s.Status)
	assert.Equal(t, "rec-1", s.Series)
	assert.Equal(t, t0.Add(time.Hour), s.SeriesCanceledAt)
	assert.Empty(t, s.Findings)
}

func TestSeriesCancelWithoutSeriesIsFound(t *testing.T) {
	s := booking.Fold([]booking.Event{
		ev(1, 0, booking.Scheduled{Slot: slot(1)}),
		ev(3, time.Hour, booking.Canceled{Reason: "moving"}), ev(4, time.Hour, booking.SeriesCanceled{CanceledBy: "host"}),
	})
	assert.Equal(t, booking.StatusCanceled, s.Status)
	require.Len(t, s.Findings, 1)
	assert.Equal(t, booking.FindingSeriesUnknown, s.Findings[0].Code)

	s = booking.Fold([]booking.Event{
		ev(1, 0, booking.Scheduled{Slot: slot(1)}), ev(2, 0, booking.SeriesJoined{Series: "rec-1"}),
		ev(3, time.Hour, booking.Canceled{Reason: "moving"}), ev(4, time.Hour, booking.SeriesCanceled{CanceledBy: "host"}),
	})
	assert.Empty(t, s.Findings, "the series joined before the cancel is known")
	assert.Equal(t, "host", s.SeriesCanceledBy)
}
