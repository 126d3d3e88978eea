package booking_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
)

// Events stamped with one instant fold in the documented order of their types, whatever order they
// arrive in and whatever their IDs: requested, scheduled, rescheduled, started, ended, no-show
// marked and cleared, payment failed, succeeded, refunded, disputed, rejected, canceled.
func TestSameInstantFoldsInTypePrecedence(t *testing.T) {
	want := []booking.EventType{
		booking.TypeRequested, booking.TypeScheduled, booking.TypeRescheduled, booking.TypeMeetingStarted,
		booking.TypeMeetingEnded, booking.TypeNoShowMarked, booking.TypeNoShowCleared, booking.TypePaymentFailed,
		booking.TypePaymentSucceeded, booking.TypePaymentRefunded, booking.TypePaymentDisputed, booking.TypeRejected,
		booking.TypeCanceled,
	}
	refs := []string{"stripe:pi_1"}
	payloads := []booking.Payload{
		booking.Canceled{}, booking.Rejected{}, booking.PaymentDisputed{Refs: refs}, booking.PaymentRefunded{Refs: refs},
		booking.PaymentSucceeded{Refs: refs}, booking.PaymentFailed{Refs: refs}, booking.NoShowCleared{}, booking.NoShowMarked{},
		booking.MeetingEnded{}, booking.MeetingStarted{}, booking.Rescheduled{Slot: slot(2)}, booking.Scheduled{Slot: slot(1)},
		booking.Requested{Slot: slot(1)},
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		events := make([]booking.Event, len(payloads))
		for i, p := range payloads {
			events[i] = ev(byte(i+1), 0, p) // IDs in the reverse of the precedence: the type decides
		}
		r.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
		var got []booking.EventType
		for _, e := range booking.Sorted(events) {
			got = append(got, e.Type())
		}
		require.Equal(t, want, got)
	}
	// An unknown type sorts after every known one.
	assert.Equal(t, 1, booking.Compare(ev(1, 0, unknownPayload{}), ev(2, 0, booking.Canceled{})))
}

type unknownPayload struct{}

func (unknownPayload) EventType() booking.EventType { return "booking.unknown.v9" }

// Canceled and rejected are terminal: every later event that would change the booking's slot,
// status, cancel details or no-show flag is kept as an after_terminal finding and changes nothing.
func TestTerminalStateRefusesEveryLaterChange(t *testing.T) {
	terminals := []struct {
		name  string
		event booking.Event
	}{
		{"canceled", ev(2, time.Minute, booking.Canceled{Reason: "first", CanceledBy: "invitee"})},
		{"rejected", ev(2, time.Minute, booking.Rejected{Reason: "first"})},
	}
	later := []booking.Payload{
		booking.Requested{Slot: slot(3)},
		booking.Scheduled{Slot: slot(3), RescheduledFrom: "b-0"},
		booking.Rescheduled{Slot: slot(3)},
		booking.Rejected{Reason: "second"},
		booking.Canceled{Reason: "second", CanceledBy: "host", RescheduledTo: "b-2", Implied: true},
		booking.NoShowMarked{},
		booking.NoShowCleared{},
	}
	for _, term := range terminals {
		base := []booking.Event{ev(1, 0, booking.Requested{Slot: slot(1)}), term.event}
		if term.name == "canceled" {
			base = append(base, ev(4, 30*time.Second, booking.NoShowMarked{}))
		}
		before := booking.Fold(base)
		require.True(t, before.Status.Terminal())
		for _, p := range later {
			t.Run(term.name+" then "+string(p.EventType()), func(t *testing.T) {
				late := ev(3, time.Hour, p)
				s := booking.Fold(append(base, late))
				require.Len(t, s.Findings, 1)
				assert.Equal(t, booking.FindingAfterTerminal, s.Findings[0].Code)
				assert.Equal(t, late.ID, s.Findings[0].Event)
				assert.Equal(t, before.Status, s.Status)
				assert.Equal(t, before.Slot, s.Slot)
				assert.Equal(t, before.CancelReason, s.CancelReason)
				assert.Equal(t, before.CanceledBy, s.CanceledBy)
				assert.Equal(t, before.CancelImplied, s.CancelImplied)
				assert.Equal(t, before.RescheduledFrom, s.RescheduledFrom)
				assert.Equal(t, before.RescheduledTo, s.RescheduledTo)
				assert.Equal(t, before.NoShow, s.NoShow)
			})
		}
	}
}

// The payment status is a lattice walked in provider time: a failure never overrides a payment, a
// success never overrides a refund or dispute, a refund never overrides a dispute.
func TestPaymentStatusOnlyMovesForward(t *testing.T) {
	refs := []string{"stripe:pi_1"}
	failed, paid := booking.PaymentFailed{Refs: refs}, booking.PaymentSucceeded{Refs: refs}
	refunded, disputed := booking.PaymentRefunded{Refs: refs}, booking.PaymentDisputed{Refs: refs}
	cases := []struct {
		seq  []booking.Payload
		want booking.PaymentStatus
	}{
		{[]booking.Payload{failed}, booking.PaymentIsFailed},
		{[]booking.Payload{paid, failed}, booking.PaymentIsPaid},
		{[]booking.Payload{refunded, failed}, booking.PaymentIsRefunded},
		{[]booking.Payload{refunded, paid}, booking.PaymentIsRefunded},
		{[]booking.Payload{disputed, paid}, booking.PaymentIsDisputed},
		{[]booking.Payload{disputed, refunded}, booking.PaymentIsDisputed},
		{[]booking.Payload{paid, disputed}, booking.PaymentIsDisputed},
	}
	for _, tc := range cases {
		var events []booking.Event
		var names []string
		for i, p := range tc.seq {
			events = append(events, ev(byte(i+1), time.Duration(i)*time.Minute, p))
			names = append(names, string(p.EventType()))
		}
		assert.Equal(t, tc.want, booking.Fold(events).Payment, strings.Join(names, " then "))
	}
}

// A booking's reschedule link is kept by a later schedule that does not repeat it, and its payment
// references are a sorted set without empty ones.
func TestScheduleKeepsLinksAndRefs(t *testing.T) {
	s := booking.Fold([]booking.Event{
		ev(1, 0, booking.Scheduled{Slot: slot(1), RescheduledFrom: "b-0", PaymentRefs: []string{"stripe:pi_9", ""}}),
		ev(2, time.Minute, booking.Scheduled{Slot: slot(2), PaymentRefs: []string{"stripe:ch_1"}}),
	})
	assert.Equal(t, booking.ID("b-0"), s.RescheduledFrom)
	assert.Equal(t, []string{"stripe:ch_1", "stripe:pi_9"}, s.PaymentRefs)
}

// A stream whose first event is an in-place reschedule (the provider's move, its create never sent)
// is an active booking scheduled at that event's time, which the slot-holder rule ranks by.
func TestRescheduleAloneSchedulesTheBooking(t *testing.T) {
	s := booking.Fold([]booking.Event{ev(1, 5*time.Minute, booking.Rescheduled{Slot: slot(2)})})
	assert.Equal(t, booking.StatusActive, s.Status)
	assert.Equal(t, slot(2), s.Slot)
	assert.Equal(t, t0.Add(5*time.Minute), s.ScheduledAt)
}
