package calendar_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
)

var t0 = time.Date(2027, 3, 15, 9, 0, 0, 0, time.UTC)

func claim(b, res, meeting string, startMin, endMin, prioMin int) calendar.Claim {
	return calendar.Claim{Booking: booking.ID(b), Resource: res, Meeting: meeting,
		Start: t0.Add(time.Duration(startMin) * time.Minute), End: t0.Add(time.Duration(endMin) * time.Minute),
		Priority: t0.Add(time.Duration(prioMin-10000) * time.Minute)}
}

func holders(a calendar.Assignment) []string {
	var out []string
	for id, h := range a.Holders {
		if h {
			out = append(out, string(id))
		}
	}
	slices.Sort(out)
	return out
}

func TestAssignSlots(t *testing.T) {
	cases := []struct {
		name      string
		claims    []calendar.Claim
		holders   []string
		conflicts []string
	}{
		{"earliest scheduled-at holds", []calendar.Claim{claim("b", "h", "m2", 0, 60, 1), claim("a", "h", "m1", 30, 90, 2)},
			[]string{"b"}, []string{"a<b"}},
		{"same scheduled-at: smaller booking id holds", []calendar.Claim{claim("b", "h", "m2", 0, 60, 1), claim("a", "h", "m1", 30, 90, 1)},
			[]string{"a"}, []string{"b<a"}},
		{"same scheduled-at: natural order, demo-9 before demo-10", []calendar.Claim{claim("demo-10", "h", "m2", 0, 60, 1), claim("demo-9", "h", "m1", 30, 90, 1)},
			[]string{"demo-9"}, []string{"demo-10<demo-9"}},
		{"back to back is no overlap", []calendar.Claim{claim("a", "h", "m1", 0, 30, 1), claim("b", "h", "m2", 30, 60, 2)},
			[]string{"a", "b"}, nil},
		{"other resource is no overlap", []calendar.Claim{claim("a", "h1", "m1", 0, 30, 1), claim("b", "h2", "m2", 0, 30, 2)},
			[]string{"a", "b"}, nil},
		{"group meeting shares the slot", []calendar.Claim{claim("g1", "h", "web", 0, 60, 1), claim("g2", "h", "web", 0, 60, 3), claim("x", "h", "m", 30, 45, 2)},
			[]string{"g1", "g2"}, []string{"x<g1", "x<g2"}},
		{"a loser does not block: chain", []calendar.Claim{claim("a", "h", "m1", 0, 60, 1), claim("b", "h", "m2", 45, 105, 2), claim("c", "h", "m3", 90, 120, 3)},
			[]string{"a", "c"}, []string{"b<a", "b<c"}},
		{"all resources or none", []calendar.Claim{claim("a", "h1", "m1", 0, 60, 1), claim("b", "h1", "m2", 0, 60, 2), claim("b", "h2", "m2", 0, 60, 2), claim("c", "h2", "m3", 0, 60, 3)},
			[]string{"a", "c"}, []string{"b<a", "b<c"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := calendar.AssignSlots(c.claims)
			assert.Equal(t, c.holders, holders(a))
			var conflicts []string
			for _, cf := range a.Conflicts {
				conflicts = append(conflicts, string(cf.Booking)+"<"+string(cf.Holder))
			}
			assert.Equal(t, c.conflicts, conflicts)
		})
	}
}

// naiveAssign is the slot-holder rule written as plainly as possible, to check the indexed one.
func naiveAssign(claims []calendar.Claim) map[booking.ID]bool {
	prio := map[booking.ID]time.Time{}
	for _, c := range claims {
		if p, ok := prio[c.Booking]; !ok || c.Priority.Before(p) {
			prio[c.Booking] = c.Priority
		}
	}
	var ids []booking.ID
	for id := range prio {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b booking.ID) int {
		if c := prio[a].Compare(prio[b]); c != 0 {
			return c
		}
		return map[bool]int{true: -1, false: 1}[a < b]
	})
	held := map[booking.ID]bool{}
	for _, id := range ids {
		free := true
		for _, c := range claims {
			if c.Booking != id {
				continue
			}
			for _, o := range claims {
				if held[o.Booking] && o.Resource == c.Resource && o.Meeting != c.Meeting && o.Start.Before(c.End) && c.Start.Before(o.End) {
					free = false
				}
			}
		}
		held[id] = free
	}
	return held
}

func TestAssignSlotsMatchesNaiveRuleInAnyOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		var claims []calendar.Claim
		for i := range 2 + r.IntN(25) {
			meeting := fmt.Sprintf("m%d", i)
			if r.IntN(4) == 0 {
				meeting = "group"
			}
			start := 15 * r.IntN(16)
			length := []int{15, 30, 60, 240}[r.IntN(4)]
			res := []string{"h1", "h2", "h3"}[r.IntN(3)]
			prio := r.IntN(10)
			claims = append(claims, claim(fmt.Sprintf("b%02d", i), res, meeting, start, start+length, prio))
			if r.IntN(5) == 0 {
				claims = append(claims, claim(fmt.Sprintf("b%02d", i), "h4", meeting, start, start+length, prio))
			}
		}
		want := naiveAssign(claims)
		got := calendar.AssignSlots(claims)
		for id, h := range want {
			require.Equal(t, h, got.Holders[id], "round %d booking %s", round, id)
		}
		r.Shuffle(len(claims), func(i, j int) { claims[i], claims[j] = claims[j], claims[i] })
		require.Equal(t, got, calendar.AssignSlots(claims), "round %d: order changed the result", round)
		// No two holders of different meetings overlap on a resource: the database guard's invariant.
		for _, a := range claims {
			for _, b := range claims {
				if got.Holders[a.Booking] && got.Holders[b.Booking] && a.Resource == b.Resource && a.Meeting != b.Meeting {
					require.False(t, a.Start.Before(b.End) && b.Start.Before(a.End), "round %d: %s and %s overlap", round, a.Booking, b.Booking)
				}
			}
		}
	}
}

func ev(b booking.ID, id byte, minutes int, p booking.Payload) booking.Event {
	return booking.Event{ID: eventlog.EventID{id, 1}, Booking: b, Provider: "calendly", OccurredAt: t0.Add(time.Duration(minutes) * time.Minute), Payload: p}
}

func TestBookingRow(t *testing.T) {
	sl := booking.Slot{Meeting: "m", Resources: []string{"h2", "h1", "h2"}, Start: t0, End: t0.Add(time.Hour)}
	cases := []struct {
		name  string
		in    calendar.BookingInput
		check func(t *testing.T, b calendar.Booking)
	}{
		{"active", calendar.BookingInput{Events: []booking.Event{ev("a", 1, 0, booking.Scheduled{Slot: sl})}, StreamVersion: 1}, func(t *testing.T, b calendar.Booking) {
			assert.Equal(t, calendar.StatusActive, b.Status)
			assert.True(t, b.Claims())
			assert.Equal(t, []string{"h1", "h2"}, b.Resources, "sorted, once each")
		}},
		{"only a no-show", calendar.BookingInput{Events: []booking.Event{ev("a", 1, 0, booking.NoShowMarked{})}}, func(t *testing.T, b calendar.Booking) {
			assert.Equal(t, calendar.StatusPending, b.Status)
			assert.False(t, b.Claims())
		}},
		{"requested does not claim", calendar.BookingInput{Events: []booking.Event{ev("a", 1, 0, booking.Requested{Slot: sl})}}, func(t *testing.T, b calendar.Booking) {
			assert.Equal(t, calendar.StatusRequested, b.Status)
			assert.False(t, b.Claims())
		}},
		{"superseded by a reschedule", calendar.BookingInput{Events: []booking.Event{ev("a", 1, 0, booking.Scheduled{Slot: sl})},
			SupersededBy: []booking.ID{"z", "y"}}, func(t *testing.T, b calendar.Booking) {
			assert.Equal(t, calendar.StatusCanceled, b.Status)
			assert.Equal(t, booking.StatusActive, b.BookingStatus)
			assert.Equal(t, booking.ID("y"), b.RescheduledTo)
			assert.True(t, b.CancelImplied)
			assert.False(t, b.Claims())
		}},
		{"refund before success never paid", calendar.BookingInput{
			Events: []booking.Event{ev("a", 1, 0, booking.Scheduled{Slot: sl, PaymentRefs: []string{"stripe:ch_1"}})},
			Payments: []calendar.LinkedPayment{{Stream: "stripe-pi_1", Events: []booking.Event{
				ev("stripe-pi_1", 3, 10, booking.PaymentRefunded{Refs: []string{"stripe:ch_1"}}),
				ev("stripe-pi_1", 2, 10, booking.PaymentSucceeded{Refs: []string{"stripe:pi_1", "stripe:ch_1"}}),
			}}}}, func(t *testing.T, b calendar.Booking) {
			assert.Equal(t, booking.PaymentIsRefunded, b.Payment)
			assert.Equal(t, []booking.ID{"stripe-pi_1"}, b.PaymentStreams)
			assert.Equal(t, []string{"stripe:ch_1", "stripe:pi_1"}, b.PaymentRefs)
			assert.Equal(t, calendar.StatusActive, b.Status, "payments never change the booking's status")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.check(t, calendar.BookingRow(c.in)) })
	}
}

func TestLinkPaymentsIsTransitive(t *testing.T) {
	streams := []calendar.PaymentStream{
		{Stream: "s3", Refs: []string{"pi_9"}},
		{Stream: "s1", Refs: []string{"ch_1", "pi_1"}},
		{Stream: "s2", Refs: []string{"pi_1"}},
		{Stream: "s4", Refs: []string{"ch_7"}},
	}
	linked, closure := calendar.NewPaymentIndex(streams).Link([]string{"ch_1"})
	assert.Equal(t, []booking.ID{"s1", "s2"}, linked)
	assert.Equal(t, []string{"ch_1", "pi_1"}, closure)
	linked, _ = calendar.NewPaymentIndex(streams).Link(nil)
	assert.Empty(t, linked)
}

func TestCalendarQueryValidate(t *testing.T) {
	assert.NoError(t, calendar.CalendarQuery{From: t0, To: t0.Add(time.Hour)}.Validate())
	for _, q := range []calendar.CalendarQuery{{To: t0}, {From: t0, To: t0}, {From: t0, To: t0.Add(400 * 24 * time.Hour)}} {
		assert.ErrorIs(t, q.Validate(), projections.ErrInvalidQuery)
	}
}
