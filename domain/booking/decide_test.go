package booking_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
)

func TestDecideRefusesMore(t *testing.T) {
	good := ev(1, 0, booking.Scheduled{Slot: slot(1)})
	with := func(mut func(*booking.Event)) booking.Event { e := good; mut(&e); return e }
	withSlot := func(mut func(*booking.Slot)) booking.Event {
		s := slot(1)
		mut(&s)
		return with(func(e *booking.Event) { e.Payload = booking.Scheduled{Slot: s} })
	}
	cases := []struct {
		name  string
		event booking.Event
		err   error
	}{
		{"no provider", with(func(e *booking.Event) { e.Provider = "" }), booking.ErrInvalidEvent},
		{"canceled rescheduled to itself", with(func(e *booking.Event) { e.Payload = booking.Canceled{RescheduledTo: "b-1"} }), booking.ErrInvalidEvent},
		{"move to an invalid slot", with(func(e *booking.Event) {
			s := slot(1)
			s.End = s.Start
			e.Payload = booking.Rescheduled{Slot: s}
		}), booking.ErrInvalidSlot},
		{"an empty resource among others", withSlot(func(s *booking.Slot) { s.Resources = []string{"host-1", ""} }), booking.ErrInvalidSlot},
		{"no meeting", withSlot(func(s *booking.Slot) { s.Meeting = "" }), booking.ErrInvalidSlot},
		{"id of 201 bytes", with(func(e *booking.Event) { e.Booking = booking.ID(strings.Repeat("x", 201)) }), booking.ErrInvalidEvent},
		{"id of 200 bytes", with(func(e *booking.Event) { e.Booking = booking.ID(strings.Repeat("x", 200)) }), nil},
		{"slot from the first instant of the year 0000 UTC", withSlot(func(s *booking.Slot) { s.Start = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC) }), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := booking.Decide(booking.State{}, tc.event)
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

func TestFromStream(t *testing.T) {
	id, ok := booking.FromStream(booking.ID("calendly-1").Stream())
	assert.True(t, ok)
	assert.Equal(t, booking.ID("calendly-1"), id)
	for _, s := range []string{"booking-", "resources", "bookings-x", ""} {
		_, ok := booking.FromStream(s)
		assert.False(t, ok, "%q", s)
	}
}

// A kept text goes back only into its own field: a rejection's reason never becomes a cancel's.
func TestWithFreeTextIgnoresAnotherField(t *testing.T) {
	id := eventlog.EventID{1}
	cancel := booking.Event{ID: id, Booking: "b-1", Payload: booking.Canceled{CanceledBy: "host"}}
	reject := booking.Event{ID: id, Booking: "b-1", Payload: booking.Rejected{}}
	assert.Equal(t, cancel, booking.WithFreeText(cancel, booking.FreeText{Booking: "b-1", Event: id, Field: booking.FieldRejectReason, Text: "x"}))
	assert.Equal(t, reject, booking.WithFreeText(reject, booking.FreeText{Booking: "b-1", Event: id, Field: booking.FieldCancelReason, Text: "x"}))
}
