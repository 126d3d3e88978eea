package calendar_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
	"bookingledger/projections/calendar"
)

// at is a slot on host h from startMin to endMin minutes after t0, of meeting m.
func at(m string, startMin, endMin int) booking.Slot {
	return booking.Slot{Meeting: m, Resources: []string{"h"}, Start: t0.Add(time.Duration(startMin) * time.Minute), End: t0.Add(time.Duration(endMin) * time.Minute)}
}

func input(events ...booking.Event) calendar.BookingInput {
	return calendar.BookingInput{Events: events, StreamVersion: uint64(len(events))}
}

func rowOf(t *testing.T, rows []calendar.Booking, id booking.ID) calendar.Booking {
	t.Helper()
	i := slices.IndexFunc(rows, func(b calendar.Booking) bool { return b.Booking == id })
	require.GreaterOrEqual(t, i, 0, "no row of %s", id)
	return rows[i]
}

// stored is a calendar computed whole from inputs: its rows and claims, as the read model keeps them.
func stored(inputs ...calendar.BookingInput) calendar.Changes {
	return calendar.Recompute(calendar.Component{Bookings: inputs})
}

// The holder is the booking scheduled first at the provider, not the one whose slot starts first; on
// the same scheduled-at the smaller booking id holds. The loser's item names the rule that decided,
// and neither depends on the order of the inputs.
func TestRecomputeRanksByScheduledAtAndNamesTheRule(t *testing.T) {
	cases := []struct {
		name          string
		first, second calendar.BookingInput
		holder, loser booking.ID
		rule          string
	}{
		{"earlier scheduled-at, later start",
			input(ev("a", 1, -60, booking.Scheduled{Slot: at("m1", 60, 120)})),
			input(ev("b", 2, -30, booking.Scheduled{Slot: at("m2", 30, 90)})),
			"a", "b", "a holds the slot (earlier provider scheduled-at)"},
		{"same scheduled-at",
			input(ev("d", 1, -60, booking.Scheduled{Slot: at("m1", 0, 60)})),
			input(ev("c", 2, -60, booking.Scheduled{Slot: at("m2", 30, 90)})),
			"c", "d", "c holds the slot (same scheduled-at, smaller booking id)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range [][]calendar.BookingInput{{tc.first, tc.second}, {tc.second, tc.first}} {
				ch := calendar.Recompute(calendar.Component{Bookings: order})
				h, l := rowOf(t, ch.Rows, tc.holder), rowOf(t, ch.Rows, tc.loser)
				assert.True(t, h.Holder)
				assert.Equal(t, calendar.StatusActive, h.Status)
				assert.False(t, l.Holder)
				assert.Equal(t, calendar.StatusConflict, l.Status)
				require.Len(t, ch.Items.Open, 1)
				it := ch.Items.Open[0]
				assert.Equal(t, calendar.ItemConflict, it.Kind)
				assert.Equal(t, string(tc.loser)+" "+string(tc.holder), it.Subject)
				assert.Equal(t, tc.loser, it.Booking)
				assert.Equal(t, tc.holder, it.OtherBooking)
				assert.Contains(t, it.Reason, tc.rule)
			}
		})
	}
}

// Recomputing one booking against the stored rest of the calendar gives what recomputing the whole
// calendar gives: the booking's own stored claims are replaced, not kept beside its new ones; only
// stored bookings whose verdict changed are restatused (never a row without a claim); the item the
// change ends is closed with the note that says why. The inputs' order does not matter.
func TestRecomputeOneBookingEqualsTheWhole(t *testing.T) {
	b := ev("b", 1, -60, booking.Scheduled{Slot: at("m1", 0, 60)})
	x := input(ev("x", 2, -30, booking.Scheduled{Slot: at("m2", 30, 90)}))
	gone := input(ev("c", 3, -90, booking.Scheduled{Slot: at("m3", 0, 60)}), ev("c", 4, -80, booking.Canceled{}))
	before := stored(input(b), x, gone)
	require.True(t, rowOf(t, before.Rows, "b").Holder)
	require.Equal(t, calendar.StatusConflict, rowOf(t, before.Rows, "x").Status)
	require.Len(t, before.Items.Open, 1)
	item := calendar.Item{ID: 7, Kind: before.Items.Open[0].Kind, Subject: before.Items.Open[0].Subject,
		Booking: "x", OtherBooking: "b", Reason: before.Items.Open[0].Reason, OpenedAt: t0}

	moved := input(b, ev("b", 5, -10, booking.Rescheduled{Slot: at("m1", 120, 180)}))
	whole := stored(moved, x, gone)
	r := rand.New(rand.NewPCG(9, 9))
	for range 20 {
		claims, rows := slices.Clone(before.Claims), slices.Clone(before.Rows)
		r.Shuffle(len(claims), func(i, j int) { claims[i], claims[j] = claims[j], claims[i] })
		r.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		ch := calendar.Recompute(calendar.Component{Bookings: []calendar.BookingInput{moved}, Claims: claims, Stored: rows, Items: []calendar.Item{item}})
		require.Len(t, ch.Rows, 1)
		assert.Equal(t, rowOf(t, whole.Rows, "b"), ch.Rows[0])
		require.Len(t, ch.Restatus, 1, "only x's verdict changed: %+v", ch.Restatus)
		assert.Equal(t, booking.ID("x"), ch.Restatus[0].Booking)
		assert.Equal(t, rowOf(t, whole.Rows, "x").Holder, ch.Restatus[0].Holder)
		assert.Equal(t, calendar.StatusActive, ch.Restatus[0].Status)
		assert.Empty(t, ch.Items.Open)
		assert.Equal(t, []calendar.ItemText{{ID: 7, Text: "closed automatically: x holds the slot now"}}, ch.Items.Close)
	}
}

// When the holder is canceled the loser takes the slot, and the item says so with the cancel's reason;
// when the loser is canceled, the item says that instead.
func TestRecomputeClosesConflictsWithTheirReason(t *testing.T) {
	a := ev("a", 1, -60, booking.Scheduled{Slot: at("m1", 0, 60)})
	x := ev("x", 2, -30, booking.Scheduled{Slot: at("m2", 30, 90)})
	before := stored(input(a), input(x))
	require.Len(t, before.Items.Open, 1)
	item := calendar.Item{ID: 3, Kind: calendar.ItemConflict, Subject: before.Items.Open[0].Subject, Booking: "x", OtherBooking: "a",
		Reason: before.Items.Open[0].Reason, OpenedAt: t0}
	others := func(id booking.ID) ([]calendar.Claim, []calendar.Booking) {
		var cs []calendar.Claim
		for _, c := range before.Claims {
			if c.Booking != id {
				cs = append(cs, c)
			}
		}
		var rs []calendar.Booking
		for _, r := range before.Rows {
			if r.Booking != id {
				rs = append(rs, r)
			}
		}
		return cs, rs
	}

	cs, rs := others("a")
	ch := calendar.Recompute(calendar.Component{Bookings: []calendar.BookingInput{input(a, ev("a", 3, 0, booking.Canceled{Reason: "sick"}))},
		Claims: cs, Stored: rs, Items: []calendar.Item{item}})
	require.Len(t, ch.Restatus, 1)
	assert.True(t, ch.Restatus[0].Holder, "x takes the slot")
	assert.Equal(t, []calendar.ItemText{{ID: 3, Text: "closed automatically: holder a is canceled now (sick); x holds the slot"}}, ch.Items.Close)

	cs, rs = others("x")
	ch = calendar.Recompute(calendar.Component{Bookings: []calendar.BookingInput{input(x, ev("x", 3, 0, booking.Canceled{Reason: "plans changed"}))},
		Claims: cs, Stored: rs, Items: []calendar.Item{item}})
	assert.Empty(t, ch.Restatus)
	assert.Equal(t, []calendar.ItemText{{ID: 3, Text: "closed automatically: x is canceled now (plans changed)"}}, ch.Items.Close)
}

// An open item whose reason is stale is refreshed, also when a closed item of the same subject is
// listed after it; an item an operator closed is neither reopened nor closed again.
func TestRecomputeRefreshesOpenItemsAndLeavesClosedOnes(t *testing.T) {
	bookings := []calendar.BookingInput{
		input(ev("a", 1, -60, booking.Scheduled{Slot: at("m1", 0, 60)})),
		input(ev("b", 2, -30, booking.Scheduled{Slot: at("m2", 30, 90)})),
	}
	want := stored(bookings...).Items.Open
	require.Len(t, want, 1)
	closed := calendar.Item{ID: 1, Kind: calendar.ItemConflict, Subject: "b a", Booking: "b", OtherBooking: "a", Reason: "old",
		OpenedAt: t0, ClosedAt: t0.Add(time.Hour), ClosedBy: calendar.ClosedByOperator}
	open := closed
	open.ID, open.ClosedAt, open.ClosedBy = 2, time.Time{}, ""
	ch := calendar.Recompute(calendar.Component{Bookings: bookings, Items: []calendar.Item{open, closed}})
	assert.Empty(t, ch.Items.Open)
	assert.Equal(t, []calendar.ItemText{{ID: 2, Text: want[0].Reason}}, ch.Items.Refresh)
	assert.Empty(t, ch.Items.Close)

	ch = calendar.Recompute(calendar.Component{Bookings: bookings, Items: []calendar.Item{closed}})
	assert.Empty(t, ch.Items.Open, "an item an operator closed is not reopened")
	assert.Empty(t, ch.Items.Refresh)

	gone := closed
	gone.Subject, gone.Booking, gone.OtherBooking = "z a", "z", "a"
	ch = calendar.Recompute(calendar.Component{Bookings: bookings, Items: []calendar.Item{gone}})
	assert.Empty(t, ch.Items.Close, "a closed item is not closed again")
}

// A stored booking rescheduled from a recomputed one supersedes it: the old booking is canceled
// (implied) and releases its slot, also before the old booking's own cancel arrives — and a request
// is superseded as well as a confirmed booking.
func TestRecomputeSupersedesFromStoredRows(t *testing.T) {
	for _, p := range []booking.Payload{booking.Scheduled{Slot: at("m1", 0, 60)}, booking.Requested{Slot: at("m1", 0, 60)}} {
		t.Run(string(p.EventType()), func(t *testing.T) {
			old := input(ev("old", 1, -60, p))
			renewed := input(ev("new", 2, -30, booking.Scheduled{Slot: at("m2", 120, 180), RescheduledFrom: "old"}))
			st := stored(renewed)
			ch := calendar.Recompute(calendar.Component{Bookings: []calendar.BookingInput{old}, Claims: st.Claims, Stored: st.Rows})
			require.Len(t, ch.Rows, 1)
			assert.Equal(t, calendar.StatusCanceled, ch.Rows[0].Status)
			assert.Equal(t, booking.ID("new"), ch.Rows[0].RescheduledTo)
			assert.True(t, ch.Rows[0].CancelImplied)
			assert.Empty(t, ch.Claims, "the old slot is released")
		})
	}
}

// A booking canceled with its own reschedule link keeps it, whatever booking says it was rescheduled
// from it.
func TestBookingRowKeepsItsOwnRescheduleLink(t *testing.T) {
	b := calendar.BookingRow(calendar.BookingInput{
		Events: []booking.Event{
			ev("a", 1, 0, booking.Scheduled{Slot: at("m", 0, 60)}),
			ev("a", 2, 5, booking.Canceled{RescheduledTo: "z"}),
		},
		SupersededBy: []booking.ID{"y"},
	})
	assert.Equal(t, booking.ID("z"), b.RescheduledTo)
	assert.Equal(t, calendar.StatusCanceled, b.Status)
}

// A late event opens a late_event item naming the event; an open one whose event takes effect now
// closes with the note saying so.
func TestRecomputeLateEventItems(t *testing.T) {
	cancel := ev("a", 1, 0, booking.Canceled{})
	create := ev("a", 2, 5, booking.Scheduled{Slot: at("m", 0, 60)})
	ch := calendar.Recompute(calendar.Component{Bookings: []calendar.BookingInput{input(cancel, create)}})
	require.Len(t, ch.Items.Open, 1)
	it := ch.Items.Open[0]
	assert.Equal(t, calendar.ItemLateEvent, it.Kind)
	assert.Equal(t, "a "+create.ID.String(), it.Subject)
	assert.Equal(t, create.ID, it.EventID)
	assert.Equal(t, booking.ID("a"), it.Booking)

	open := calendar.Item{ID: 4, Kind: it.Kind, Subject: it.Subject, Booking: "a", EventID: create.ID, Reason: it.Reason, OpenedAt: t0}
	ch = calendar.Recompute(calendar.Component{Bookings: []calendar.BookingInput{input(create)}, Items: []calendar.Item{open}})
	assert.Equal(t, []calendar.ItemText{{ID: 4, Text: "closed automatically: the event takes effect now (an event that arrived later reordered the fold)"}}, ch.Items.Close)
}

// A loser conflicts with every holder it overlaps, also one ranked after it that holds only because
// the loser lost to an earlier holder: that item's reason must not claim the holder was scheduled
// earlier (or has the smaller id) — its own times say otherwise.
func TestRecomputeReasonOfAConflictWithALaterHolder(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cPrio  int
		absent string
	}{
		{"scheduled later", -30, "c holds the slot (earlier provider scheduled-at)"},
		{"same scheduled-at, larger id", -60, "c holds the slot (same scheduled-at, smaller booking id)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := calendar.Recompute(calendar.Component{Bookings: []calendar.BookingInput{
				input(ev("a", 1, -90, booking.Scheduled{Slot: at("m1", 0, 60)})),
				input(ev("b", 2, -60, booking.Scheduled{Slot: at("m2", 45, 105)})),
				input(ev("c", 3, tc.cPrio, booking.Scheduled{Slot: at("m3", 90, 120)})),
			}})
			reasons := map[string]string{}
			for _, it := range ch.Items.Open {
				reasons[it.Subject] = it.Reason
			}
			require.Len(t, reasons, 2)
			assert.Contains(t, reasons["b a"], "a holds the slot (earlier provider scheduled-at)")
			assert.NotContains(t, reasons["b c"], tc.absent)
			assert.Contains(t, reasons["b c"], "c holds the slot (ranked after b, which lost to an earlier holder)")
		})
	}
}
