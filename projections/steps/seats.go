package steps

import (
	"slices"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
)

// Touched returns the bookings whose streams events belong to, once each, in order.
func Touched(events []eventlog.RecordedEvent) []string {
	var touched []string
	for _, e := range events {
		if id, ok := booking.FromStream(e.StreamID); ok && !slices.Contains(touched, string(id)) {
			touched = append(touched, string(id))
		}
	}
	return touched
}

// Leaving is one attendee leaving a seated booking (a booking.SeatRemoved of a batch).
type Leaving struct {
	Booking string
	Event   string // the event's ID, as the calendar's findings name it
	Seat    string // booking.Seat.Key
}

// Leavings are the seat removals among events, in order; a removal that names no seat is none.
func Leavings(events []booking.Event) []Leaving {
	var out []Leaving
	for _, e := range events {
		if p, ok := e.Payload.(booking.SeatRemoved); ok && p.Seat.Key() != "" {
			out = append(out, Leaving{Booking: string(e.Booking), Event: e.ID.String(), Seat: p.Seat.Key()})
		}
	}
	return out
}

// LeavingBookings returns the bookings of leavings, once each, in order.
func LeavingBookings(leavings []Leaving) []string {
	var ids []string
	for _, l := range leavings {
		if !slices.Contains(ids, l.Booking) {
			ids = append(ids, l.Booking)
		}
	}
	return ids
}

// SeatCancellations plans, for each attendee leaving a seated booking, their own cancellation email:
// one step keyed by booking and seat (re-planning, a redelivery or a rebuild finds the key and adds
// nothing), at the booking's slot, from its calendar row in rows. A leaving the booking's fold did not
// take (a finding on the event: the seat was unknown, or the booking had already ended), or of a
// booking the calendar has no row for, plans nothing. Whether the step is sent, or left to the
// booking's own cancellation because the leaver is the booking's contact and the booking ended with
// them, is decided when it runs.
func SeatCancellations(leavings []Leaving, rows map[string]Row) []Step {
	var out []Step
	for _, l := range leavings {
		c, ok := rows[l.Booking]
		if !ok || slices.Contains(c.Findings, l.Event) {
			continue
		}
		s := Step{Key: SeatStepKey(l.Booking, l.Seat), Kind: EmailSeatCancellation, Thread: l.Booking, Booking: l.Booking,
			State: StatePending, Answers: "seat " + l.Seat + " left", Seat: l.Seat}
		if len(c.Resources) > 0 {
			s.Resource = c.Resources[0]
		}
		if !c.Start.IsZero() && !c.End.IsZero() {
			s.Start, s.End = c.Start, c.End
		}
		out = append(out, s)
	}
	return out
}
