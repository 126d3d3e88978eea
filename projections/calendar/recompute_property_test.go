package calendar_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
	"bookingledger/projections/calendar"
)

// genCalendar draws bookings on three hosts from a small range of slots and times, so that overlaps,
// ties of scheduled-at, shared meetings, cancels, late creates, requests and reschedules are common.
func genCalendar(r *rand.Rand) []calendar.BookingInput {
	n := 3 + r.IntN(8)
	var out []calendar.BookingInput
	for i := range n {
		id := booking.ID(fmt.Sprintf("b%d", i))
		start := 15 * r.IntN(12)
		meeting := fmt.Sprintf("m%d", i)
		if r.IntN(4) == 0 {
			meeting = "group"
		}
		res := []string{[]string{"h1", "h2", "h3"}[r.IntN(3)]}
		if r.IntN(5) == 0 {
			res = append(res, "h4")
		}
		sl := booking.Slot{Meeting: meeting, Resources: res, Start: t0.Add(time.Duration(start) * time.Minute), End: t0.Add(time.Duration(start+15*(1+r.IntN(4))) * time.Minute)}
		at := -r.IntN(4)
		var p booking.Payload = booking.Scheduled{Slot: sl}
		switch r.IntN(6) {
		case 0:
			p = booking.Requested{Slot: sl}
		case 1:
			if i > 0 {
				p = booking.Scheduled{Slot: sl, RescheduledFrom: booking.ID(fmt.Sprintf("b%d", r.IntN(i)))}
			}
		}
		events := []booking.Event{ev(id, 1, at, p)}
		switch r.IntN(6) {
		case 0:
			events = append(events, ev(id, 2, at+r.IntN(3)-1, booking.Canceled{Reason: "r"}))
		case 1:
			events = append(events, ev(id, 2, at+1, booking.Rescheduled{Slot: booking.Slot{Meeting: meeting, Resources: res, Start: sl.Start.Add(30 * time.Minute), End: sl.End.Add(30 * time.Minute)}}))
		}
		out = append(out, input(events...))
	}
	return out
}

func items(ch calendar.Changes) []calendar.Item {
	var out []calendar.Item
	for i, d := range ch.Items.Open {
		out = append(out, calendar.Item{ID: int64(i + 1), Kind: d.Kind, Subject: d.Subject, Booking: d.Booking, OtherBooking: d.OtherBooking,
			EventID: d.EventID, Reason: d.Reason, OpenedAt: t0})
	}
	return out
}

func sortedRows(rows []calendar.Booking) []calendar.Booking {
	out := slices.Clone(rows)
	slices.SortFunc(out, func(a, b calendar.Booking) int { return cmp.Compare(a.Booking, b.Booking) })
	return out
}

func sortedDesired(ds []calendar.DesiredItem) []calendar.DesiredItem {
	out := slices.Clone(ds)
	slices.SortFunc(out, func(a, b calendar.DesiredItem) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Subject, b.Subject))
	})
	return out
}

// The calendar is a function of the set of bookings (any input order gives the same rows and items);
// recomputing any one booking against the stored rest changes nothing; and a booking's last event
// recomputed against the calendar stored without it (with the stored claims of the bookings
// recomputed, as a loader passes them) gives the whole calendar's rows, restatuses exactly the stored
// bookings whose verdict changed, and opens and closes exactly the items that differ (invariants 3
// and 6 of docs/architecture.md, at the rule's level).
func TestRecomputeIsAFunctionOfTheSetAndIncrementalEqualsWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 13))
	seen, changed := map[string]int{}, 0
	for round := range 300 {
		in := genCalendar(r)
		whole := calendar.Recompute(calendar.Component{Bookings: in})
		for _, d := range whole.Items.Open {
			seen[string(d.Kind)]++
		}
		for _, b := range whole.Rows {
			if b.CancelImplied && b.BookingStatus != booking.StatusCanceled {
				seen["superseded"]++
			}
		}
		shuffled := slices.Clone(in)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		again := calendar.Recompute(calendar.Component{Bookings: shuffled})
		require.Equal(t, sortedRows(whole.Rows), sortedRows(again.Rows), "round %d", round)
		require.Equal(t, sortedDesired(whole.Items.Open), sortedDesired(again.Items.Open), "round %d", round)

		stored := items(whole)
		for i, b := range in {
			id := whole.Rows[i].Booking
			var claims []calendar.Claim
			for _, c := range whole.Claims {
				if c.Booking != id {
					claims = append(claims, c)
				}
			}
			// The items in scope: every conflict (Claims is the whole rest), the booking's own late events.
			scope := slices.DeleteFunc(slices.Clone(stored), func(it calendar.Item) bool {
				return it.Kind == calendar.ItemLateEvent && it.Booking != id
			})
			ch := calendar.Recompute(calendar.Component{Bookings: []calendar.BookingInput{b}, Claims: claims, Stored: whole.Rows, Items: scope})
			require.Equal(t, whole.Rows[i], ch.Rows[0], "round %d booking %s", round, id)
			require.Empty(t, ch.Restatus, "round %d booking %s", round, id)
			require.Empty(t, ch.Items.Open, "round %d booking %s", round, id)
			require.Empty(t, ch.Items.Refresh, "round %d booking %s", round, id)
			require.Empty(t, ch.Items.Close, "round %d booking %s", round, id)

			// The booking's last event arrives against the calendar stored without it. Recomputed with
			// it, as the read model does, are the two ends of its reschedule link, now and before.
			if len(b.Events) < 2 {
				continue
			}
			before := slices.Clone(in)
			before[i] = input(b.Events[:len(b.Events)-1]...)
			old := calendar.Recompute(calendar.Component{Bookings: before})
			redo := map[booking.ID]bool{id: true}
			var inputs []calendar.BookingInput
			for k := range in {
				r := whole.Rows[k].Booking
				if r == id || r == old.Rows[i].RescheduledFrom || r == whole.Rows[i].RescheduledFrom {
					redo[r] = true
					inputs = append(inputs, in[k])
				}
			}
			claims = old.Claims // the recomputed bookings' old claims too, as a loader seeds the connected set
			scope = slices.DeleteFunc(items(old), func(it calendar.Item) bool {
				return it.Kind == calendar.ItemLateEvent && !redo[it.Booking]
			})
			ch = calendar.Recompute(calendar.Component{Bookings: inputs, Claims: claims, Stored: old.Rows, Items: scope})
			for _, row := range ch.Rows {
				require.Equal(t, rowOf(t, whole.Rows, row.Booking), row, "round %d booking %s", round, id)
			}
			var restatus, want []booking.ID
			for _, rs := range ch.Restatus {
				restatus = append(restatus, rs.Booking)
				require.Equal(t, rowOf(t, whole.Rows, rs.Booking).Holder, rs.Holder)
			}
			for k, o := range old.Rows {
				if !redo[o.Booking] && o.Holder != whole.Rows[k].Holder {
					want = append(want, o.Booking)
				}
			}
			require.ElementsMatch(t, want, restatus, "round %d booking %s", round, id)
			changed += len(restatus)
			var opened, closed, wantOpen, wantClosed []string
			for _, d := range ch.Items.Open {
				opened = append(opened, d.Subject)
			}
			was, is, subject := map[string]bool{}, map[string]bool{}, map[int64]string{}
			for _, it := range scope {
				was[it.Subject], subject[it.ID] = true, it.Subject
			}
			for _, c := range ch.Items.Close {
				closed = append(closed, subject[c.ID])
			}
			for _, d := range whole.Items.Open {
				if d.Kind == calendar.ItemConflict || redo[d.Booking] {
					is[d.Subject] = true
					if !was[d.Subject] {
						wantOpen = append(wantOpen, d.Subject)
					}
				}
			}
			for _, it := range scope {
				if !is[it.Subject] {
					wantClosed = append(wantClosed, it.Subject)
				}
			}
			require.ElementsMatch(t, wantOpen, opened, "round %d booking %s", round, id)
			require.ElementsMatch(t, wantClosed, closed, "round %d booking %s", round, id)
		}
	}
	t.Logf("items and supersessions drawn: %v", seen)
	require.Positive(t, changed, "no recompute changed another booking's verdict")
	for _, k := range []string{string(calendar.ItemConflict), string(calendar.ItemLateEvent), "superseded"} {
		require.Positive(t, seen[k], "the draw never made a %s", k)
	}
}
