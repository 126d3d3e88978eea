package booking_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func slot(startHour int) booking.Slot {
	start := t0.Add(time.Duration(startHour) * time.Hour)
	return booking.Slot{Meeting: fmt.Sprintf("meeting-%d", startHour), Resources: []string{"host-1"}, Start: start, End: start.Add(30 * time.Minute)}
}

func ev(id byte, at time.Duration, p booking.Payload) booking.Event {
	return booking.Event{ID: eventlog.EventID{id}, Booking: "b-1", Provider: "test", OccurredAt: t0.Add(at), Payload: p}
}

func TestEvolveTransitions(t *testing.T) {
	cases := []struct {
		name     string
		events   []booking.Event
		status   booking.Status
		findings []booking.FindingCode
		check    func(t *testing.T, s booking.State)
	}{
		{
			name:   "scheduled",
			events: []booking.Event{ev(1, 0, booking.Scheduled{Slot: slot(1)})},
			status: booking.StatusActive,
			check: func(t *testing.T, s booking.State) {
				assert.Equal(t, slot(1), s.Slot)
				assert.Equal(t, t0, s.ScheduledAt)
			},
		},
		{
			name:   "canceled four minutes after create",
			events: []booking.Event{ev(2, 4*time.Minute, booking.Canceled{Reason: "conflict"}), ev(1, 0, booking.Scheduled{Slot: slot(1)})},
			status: booking.StatusCanceled,
			check: func(t *testing.T, s booking.State) {
				assert.Equal(t, "conflict", s.CancelReason)
				assert.Equal(t, slot(1), s.Slot, "the canceled slot stays known for history")
			},
		},
		{
			name:     "create stamped after its cancel is kept but refused",
			events:   []booking.Event{ev(1, 0, booking.Canceled{}), ev(2, time.Minute, booking.Scheduled{Slot: slot(1)})},
			status:   booking.StatusCanceled,
			findings: []booking.FindingCode{booking.FindingAfterTerminal},
			check: func(t *testing.T, s booking.State) {
				assert.False(t, s.HasSlot())
				assert.Equal(t, 2, s.Events)
			},
		},
		{
			name:   "cancel and create in the same second: cancel wins",
			events: []booking.Event{ev(9, 0, booking.Canceled{}), ev(1, 0, booking.Scheduled{Slot: slot(1)})},
			status: booking.StatusCanceled,
		},
		{
			name:   "requested then confirmed",
			events: []booking.Event{ev(2, time.Minute, booking.Scheduled{Slot: slot(2)}), ev(1, 0, booking.Requested{Slot: slot(1)})},
			status: booking.StatusActive,
			check: func(t *testing.T, s booking.State) {
				assert.Equal(t, slot(2), s.Slot)
				assert.Equal(t, t0, s.ScheduledAt, "scheduled-at is the first request")
			},
		},
		{
			name:     "request after confirmation is superseded",
			events:   []booking.Event{ev(1, 0, booking.Scheduled{Slot: slot(1)}), ev(2, time.Minute, booking.Requested{Slot: slot(2)})},
			status:   booking.StatusActive,
			findings: []booking.FindingCode{booking.FindingSuperseded},
		},
		{
			name:   "requested then rejected",
			events: []booking.Event{ev(1, 0, booking.Requested{Slot: slot(1)}), ev(2, time.Minute, booking.Rejected{Reason: "busy"})},
			status: booking.StatusRejected,
		},
		{
			name:   "rescheduled in place moves the slot",
			events: []booking.Event{ev(1, 0, booking.Scheduled{Slot: slot(1)}), ev(2, time.Hour, booking.Rescheduled{Slot: slot(3)}), ev(3, 2*time.Hour, booking.Rescheduled{Slot: slot(5)})},
			status: booking.StatusActive,
			check:  func(t *testing.T, s booking.State) { assert.Equal(t, slot(5), s.Slot) },
		},
		{
			name:   "reschedule link on cancel",
			events: []booking.Event{ev(1, 0, booking.Scheduled{Slot: slot(1)}), ev(2, time.Hour, booking.Canceled{RescheduledTo: "b-2", Implied: true, CanceledBy: "provider"})},
			status: booking.StatusCanceled,
			check: func(t *testing.T, s booking.State) {
				assert.Equal(t, booking.ID("b-2"), s.RescheduledTo)
				assert.True(t, s.CancelImplied)
			},
		},
		{
			name:   "no-show marked then cleared",
			events: []booking.Event{ev(1, 0, booking.Scheduled{Slot: slot(1)}), ev(3, 2*time.Hour, booking.NoShowCleared{}), ev(2, time.Hour, booking.NoShowMarked{})},
			status: booking.StatusActive,
			check:  func(t *testing.T, s booking.State) { assert.False(t, s.NoShow) },
		},
		{
			name: "refund arriving before success still ends refunded",
			events: []booking.Event{
				ev(3, 2*time.Hour, booking.PaymentRefunded{Refs: []string{"stripe:ch_1"}}),
				ev(1, 0, booking.Scheduled{Slot: slot(1), PaymentRefs: []string{"stripe:ch_1"}}),
				ev(2, time.Hour, booking.PaymentSucceeded{Refs: []string{"stripe:pi_1", "stripe:ch_1"}}),
			},
			status: booking.StatusActive,
			check: func(t *testing.T, s booking.State) {
				assert.Equal(t, booking.PaymentIsRefunded, s.Payment)
				assert.Equal(t, []string{"stripe:ch_1", "stripe:pi_1"}, s.PaymentRefs)
			},
		},
		{
			name:   "failure then success in the same second is paid",
			events: []booking.Event{ev(2, 0, booking.PaymentSucceeded{Refs: []string{"stripe:pi_1"}}), ev(1, 0, booking.PaymentFailed{Refs: []string{"stripe:pi_1"}})},
			status: booking.StatusNone,
			check:  func(t *testing.T, s booking.State) { assert.Equal(t, booking.PaymentIsPaid, s.Payment) },
		},
		{
			name:   "refund after cancel applies",
			events: []booking.Event{ev(1, 0, booking.Scheduled{Slot: slot(1)}), ev(2, time.Hour, booking.Canceled{}), ev(3, 2*time.Hour, booking.PaymentRefunded{Refs: []string{"stripe:pi_1"}})},
			status: booking.StatusCanceled,
			check:  func(t *testing.T, s booking.State) { assert.Equal(t, booking.PaymentIsRefunded, s.Payment) },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := booking.Fold(tc.events)
			assert.Equal(t, tc.status, s.Status)
			var codes []booking.FindingCode
			for _, f := range s.Findings {
				codes = append(codes, f.Code)
				assert.NotEmpty(t, f.Reason)
			}
			assert.Equal(t, tc.findings, codes)
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

func TestDecideValidates(t *testing.T) {
	good := ev(1, 0, booking.Scheduled{Slot: slot(1)})
	bad := func(mut func(*booking.Event)) booking.Event { e := good; mut(&e); return e }
	badSlot := slot(1)
	badSlot.End = badSlot.Start
	// Times an event cannot be stored with (RFC 3339 has four-digit years), and a capacity beyond
	// the read model's integer: a provider body may carry either.
	year10000 := time.Date(9999, 12, 31, 23, 59, 59, 0, time.FixedZone("-23:59", -(23*3600+59*60)))
	lateSlot := slot(1)
	lateSlot.End = year10000
	earlySlot := slot(1)
	earlySlot.Start = time.Date(0, 1, 1, 0, 0, 0, 0, time.FixedZone("+01:00", 3600))
	cases := []struct {
		name  string
		state booking.State
		event booking.Event
		err   error
	}{
		{"valid", booking.State{}, good, nil},
		{"valid on its own booking", booking.State{Booking: "b-1"}, good, nil},
		{"no booking", booking.State{}, bad(func(e *booking.Event) { e.Booking = "" }), booking.ErrInvalidEvent},
		{"booking with space", booking.State{}, bad(func(e *booking.Event) { e.Booking = "a b" }), booking.ErrInvalidEvent},
		{"booking with NUL", booking.State{}, bad(func(e *booking.Event) { e.Booking = "calcom-a\x00b" }), booking.ErrInvalidEvent},
		{"booking with a control character", booking.State{}, bad(func(e *booking.Event) { e.Booking = "calcom-a\x1bb" }), booking.ErrInvalidEvent},
		{"booking that is not UTF-8", booking.State{}, bad(func(e *booking.Event) { e.Booking = "calcom-a\xffb" }), booking.ErrInvalidEvent},
		{"other booking", booking.State{Booking: "b-2"}, good, booking.ErrWrongBooking},
		{"no id", booking.State{}, bad(func(e *booking.Event) { e.ID = eventlog.EventID{} }), booking.ErrInvalidEvent},
		{"no provider time", booking.State{}, bad(func(e *booking.Event) { e.OccurredAt = time.Time{} }), booking.ErrInvalidEvent},
		{"no payload", booking.State{}, bad(func(e *booking.Event) { e.Payload = nil }), booking.ErrInvalidEvent},
		{"end not after start", booking.State{}, bad(func(e *booking.Event) { e.Payload = booking.Scheduled{Slot: badSlot} }), booking.ErrInvalidSlot},
		{"no resource", booking.State{}, bad(func(e *booking.Event) { s := slot(1); s.Resources = nil; e.Payload = booking.Scheduled{Slot: s} }), booking.ErrInvalidSlot},
		{"rescheduled from itself", booking.State{}, bad(func(e *booking.Event) { e.Payload = booking.Scheduled{Slot: slot(1), RescheduledFrom: "b-1"} }), booking.ErrInvalidEvent},
		{"provider time in the year 10000 UTC", booking.State{}, bad(func(e *booking.Event) { e.OccurredAt = year10000 }), booking.ErrInvalidEvent},
		{"slot ending in the year 10000 UTC", booking.State{}, bad(func(e *booking.Event) { e.Payload = booking.Scheduled{Slot: lateSlot} }), booking.ErrInvalidSlot},
		{"slot starting before the year 0000 UTC", booking.State{}, bad(func(e *booking.Event) { e.Payload = booking.Requested{Slot: earlySlot} }), booking.ErrInvalidSlot},
		{"slot at the last second of 9999", booking.State{}, bad(func(e *booking.Event) {
			s := slot(1)
			s.End = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
			e.Payload = booking.Scheduled{Slot: s}
		}), nil},
		{"capacity beyond the maximum", booking.State{}, bad(func(e *booking.Event) {
			e.Payload = booking.Scheduled{Slot: slot(1), Capacity: booking.MaxCapacity + 1}
		}), booking.ErrInvalidEvent},
		{"request with a capacity of 3e9", booking.State{}, bad(func(e *booking.Event) {
			e.Payload = booking.Requested{Slot: slot(1), Capacity: 3_000_000_000}
		}), booking.ErrInvalidEvent},
		{"negative capacity", booking.State{}, bad(func(e *booking.Event) { e.Payload = booking.Scheduled{Slot: slot(1), Capacity: -1} }), booking.ErrInvalidEvent},
		{"capacity at the maximum", booking.State{}, bad(func(e *booking.Event) {
			e.Payload = booking.Scheduled{Slot: slot(1), Capacity: booking.MaxCapacity}
		}), nil},
		{"seat without key", booking.State{}, bad(func(e *booking.Event) { e.Payload = booking.SeatAdded{Slot: slot(1), Capacity: 3} }), booking.ErrInvalidEvent},
		{"seat removal without key", booking.State{}, bad(func(e *booking.Event) { e.Payload = booking.SeatRemoved{} }), booking.ErrInvalidEvent},
		{"seat with a bad slot", booking.State{}, bad(func(e *booking.Event) { e.Payload = booking.SeatAdded{Slot: badSlot, Seat: seatOf(1)} }), booking.ErrInvalidSlot},
		{"seat by attendee key only", booking.State{}, bad(func(e *booking.Event) {
			e.Payload = booking.SeatAdded{Slot: slot(1), Capacity: 3, Seat: booking.Seat{Attendee: "email-sha256:0123456789abcdef"}}
		}), nil},
		{"series link without series", booking.State{}, bad(func(e *booking.Event) { e.Payload = booking.SeriesJoined{} }), booking.ErrInvalidEvent},
		{"payment without ref", booking.State{}, bad(func(e *booking.Event) { e.Payload = booking.PaymentSucceeded{} }), booking.ErrInvalidEvent},
		{"late create after cancel is still valid", booking.State{Booking: "b-1", Status: booking.StatusCanceled}, good, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := booking.Decide(tc.state, tc.event)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				assert.Empty(t, out)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []booking.Event{tc.event}, out)
		})
	}
}

// genEvents draws a random event set for one booking: creates (some as reschedule targets), cancels
// (some as reschedule sources), in-place reschedules, no-shows, requests, rejections and payments,
// with provider times drawn from a small range so that ties (and the precedence rule) are common.
func genEvents(r *rand.Rand) []booking.Event {
	n := 2 + r.IntN(5)
	out := make([]booking.Event, 0, n)
	for i := range n {
		at := time.Duration(r.IntN(4)) * time.Minute
		var p booking.Payload
		switch r.IntN(10) {
		case 0, 1:
			sc := booking.Scheduled{Slot: slot(r.IntN(3)), Capacity: 1 + r.IntN(2)}
			if r.IntN(3) == 0 {
				sc.RescheduledFrom = "b-0"
			}
			p = sc
		case 2:
			c := booking.Canceled{Reason: "r"}
			if r.IntN(2) == 0 {
				c.RescheduledTo, c.Implied = "b-2", r.IntN(2) == 0
			}
			p = c
		case 3:
			p = booking.Rescheduled{Slot: slot(3 + r.IntN(2))}
		case 4:
			p = booking.NoShowMarked{}
		case 5:
			p = booking.NoShowCleared{}
		case 6:
			p = booking.Requested{Slot: slot(r.IntN(3))}
		case 7:
			switch r.IntN(4) {
			case 0:
				p = booking.Rejected{Reason: "no"}
			case 1:
				p = booking.SeatAdded{Slot: slot(r.IntN(3)), Capacity: 2, Seat: seatOf(r.IntN(3))}
			case 2:
				p = booking.SeatRemoved{Seat: seatOf(r.IntN(3))}
			default:
				p = booking.SeriesJoined{Series: fmt.Sprintf("series-%d", r.IntN(2))}
			}
		case 8:
			p = booking.PaymentSucceeded{Refs: []string{"stripe:pi_1"}}
		default:
			p = booking.PaymentRefunded{Refs: []string{"stripe:pi_1"}}
		}
		out = append(out, ev(byte(i+1), at, p))
	}
	return out
}

// permutations calls f with every ordering of events (Heap's algorithm).
func permutations(events []booking.Event, f func([]booking.Event)) {
	a := append([]booking.Event(nil), events...)
	c := make([]int, len(a))
	f(a)
	for i := 0; i < len(a); {
		if c[i] < i {
			if i%2 == 0 {
				a[0], a[i] = a[i], a[0]
			} else {
				a[c[i]], a[i] = a[i], a[c[i]]
			}
			f(a)
			c[i]++
			i = 0
		} else {
			c[i] = 0
			i++
		}
	}
}

func withDuplicates(r *rand.Rand, events []booking.Event) []booking.Event {
	out := append([]booking.Event(nil), events...)
	for range r.IntN(4) {
		dup := events[r.IntN(len(events))]
		pos := r.IntN(len(out) + 1)
		out = append(out[:pos], append([]booking.Event{dup}, out[pos:]...)...)
	}
	return out
}

// TestFoldIsAFunctionOfTheSet: any arrival order of a booking's events, with any duplicates, folds to
// the same state (invariant 3 of docs/architecture.md).
func TestFoldIsAFunctionOfTheSet(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BOOKINGLEDGER_PROPERTY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	t.Logf("seed %d (set BOOKINGLEDGER_PROPERTY_SEED to replay)", seed)
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	sets, orders := 300, 0
	if testing.Short() {
		sets = 50
	}
	for range sets {
		events := genEvents(r)
		want := booking.Fold(events)
		permutations(events, func(order []booking.Event) {
			orders++
			got := booking.Fold(withDuplicates(r, order))
			if !assert.Equal(t, want, got, "set %v folded differently in order %v", ids(events), ids(order)) {
				t.FailNow()
			}
		})
		assert.Equal(t, len(events), want.Events, "duplicates are folded once")
	}
	t.Logf("%d event sets, %d orders", sets, orders)
}

func ids(events []booking.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = fmt.Sprintf("%d:%s@%s", e.ID[0], e.Type(), e.OccurredAt.Sub(t0))
	}
	return out
}
