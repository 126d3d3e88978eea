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

// SeatCancellations plans the leavers' own cancellation emails of the seated bookings among rows,
// from each booking's whole folded state, never from the batch that is being applied: for each seat
// that left it (Booking.Left: the seat removals its fold took, over all its events), one step keyed
// by booking and seat (SeatStepKey), at the booking's slot. So every arrival order, a redelivery, a
// replay and a rebuild plan the same steps: a seat's cancel that arrives before its create is an
// unknown seat until the create arrives, and its email is planned with the create.
//
// existing are the steps the bookings have: a key among them is not planned again. A pending seat
// cancellation whose seat the fold no longer has leaving (an earlier cancel of the whole booking
// arrived: its removal changed nothing) is skipped. Whether a planned step is sent, or left to the
// booking's own cancellation because the leaver is the booking's contact and the booking ended with
// them, is decided when it runs.
func SeatCancellations(rows Rows, existing []Step) Plan {
	ids := make([]string, 0, len(rows))
	for id, r := range rows {
		if r.Seated && r.LeftKnown {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var p Plan
	for _, id := range ids {
		c := rows[id]
		for _, s := range existing {
			if s.Kind == EmailSeatCancellation && s.Booking == id && s.State == StatePending && !slices.Contains(c.Left, s.Seat) {
				p.Skip = append(p.Skip, Skip{Key: s.Key, Note: "superseded: booking " + id + " ended before this seat's removal, which changed nothing"})
			}
		}
		var planned []string
		for _, seat := range c.Left {
			if seat == "" || slices.Contains(planned, seat) {
				continue
			}
			planned = append(planned, seat)
			key := SeatStepKey(id, seat)
			if slices.ContainsFunc(existing, func(s Step) bool { return s.Key == key }) {
				continue
			}
			s := Step{Key: key, Kind: EmailSeatCancellation, Thread: id, Booking: id, State: StatePending,
				Answers: "seat " + seat + " left", Seat: seat}
			if len(c.Resources) > 0 {
				s.Resource = c.Resources[0]
			}
			if !c.Start.IsZero() && !c.End.IsZero() {
				s.Start, s.End = c.Start, c.End
			}
			p.Insert = append(p.Insert, s)
		}
	}
	return p
}
