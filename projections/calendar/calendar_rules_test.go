package calendar_test

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
)

// A row takes the payment references the linker closed over when it has them, and names each
// linked payment stream once.
func TestBookingRowPaymentLinks(t *testing.T) {
	pay := ev("stripe-pi_1", 2, 10, booking.PaymentSucceeded{Refs: []string{"stripe:pi_1"}})
	b := calendar.BookingRow(calendar.BookingInput{
		Events:      []booking.Event{ev("a", 1, 0, booking.Scheduled{Slot: at("m", 0, 60), PaymentRefs: []string{"stripe:pi_1"}})},
		Payments:    []calendar.LinkedPayment{{Stream: "stripe-pi_1", Events: []booking.Event{pay}}, {Stream: "stripe-pi_1", Events: []booking.Event{pay}}},
		PaymentRefs: []string{"stripe:ch_1", "stripe:pi_1"},
	})
	assert.Equal(t, []booking.ID{"stripe-pi_1"}, b.PaymentStreams)
	assert.Equal(t, []string{"stripe:ch_1", "stripe:pi_1"}, b.PaymentRefs)
	assert.Equal(t, booking.PaymentIsPaid, b.Payment)
}

// Rows keep times as the read model stores them (microseconds, UTC), so the slot rule compares
// what PostgreSQL compares.
func TestBookingRowTimesAreMicroseconds(t *testing.T) {
	start := t0.Add(1500 * time.Nanosecond).In(time.FixedZone("+02:00", 7200))
	b := calendar.BookingRow(input(ev("a", 1, 0, booking.Scheduled{Slot: booking.Slot{Meeting: "m", Resources: []string{"h"}, Start: start, End: start.Add(time.Hour)}})))
	assert.Equal(t, t0.Add(time.Microsecond), b.Start)
	assert.Equal(t, time.UTC, b.Start.Location())
}

func TestIsPaymentOnly(t *testing.T) {
	assert.False(t, calendar.IsPaymentOnly(nil), "no events is no payment")
	assert.True(t, calendar.IsPaymentOnly([]booking.Event{ev("s", 1, 0, booking.PaymentFailed{Refs: []string{"x"}})}))
	assert.False(t, calendar.IsPaymentOnly([]booking.Event{ev("s", 1, 0, booking.PaymentFailed{Refs: []string{"x"}}), ev("s", 2, 0, booking.NoShowMarked{})}))
}

func TestCalendarQueryBounds(t *testing.T) {
	ok := calendar.CalendarQuery{From: t0, To: t0.Add(calendar.MaxCalendarWindow), Limit: calendar.MaxCalendarPage}
	assert.NoError(t, ok.Validate(), "a window of exactly 366 days and the largest page")
	big := ok
	big.Limit++
	assert.ErrorIs(t, big.Validate(), projections.ErrInvalidQuery)
}

func TestCalendarCursor(t *testing.T) {
	c := calendar.CalendarCursor{Start: t0, Resource: "h", Booking: "a"}
	got, err := calendar.ParseCalendarCursor(c.String())
	require.NoError(t, err)
	assert.True(t, got.Start.Equal(t0))
	assert.Equal(t, c.Resource, got.Resource)
	assert.Equal(t, c.Booking, got.Booking)
	four := base64.RawURLEncoding.EncodeToString([]byte(`["2027-03-15T09:00:00Z","h","a","x"]`))
	_, err = calendar.ParseCalendarCursor(four)
	assert.ErrorIs(t, err, projections.ErrInvalidQuery)

	entries := []calendar.CalendarEntry{{Booking: "a", Resource: "h", Start: t0}}
	assert.Nil(t, calendar.CalendarPage{Entries: entries}.Next(), "the last page has no next cursor")
	assert.Equal(t, &calendar.CalendarCursor{Start: t0, Resource: "h", Booking: "a"}, calendar.CalendarPage{Entries: entries, More: true}.Next())
}
