package booking_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
)

func TestSplitFreeTextTakesTheTypedReasonsOnly(t *testing.T) {
	id := eventlog.EventID{1}
	tests := []struct {
		name    string
		payload booking.Payload
		field   booking.FreeTextField
		kept    booking.Payload // the payload left in the event
	}{
		{"cancel reason", booking.Canceled{Reason: "sick", CanceledBy: "invitee"}, booking.FieldCancelReason, booking.Canceled{CanceledBy: "invitee"}},
		{"rejection reason", booking.Rejected{Reason: "full"}, booking.FieldRejectReason, booking.Rejected{}},
		{"implied cancel: the reason is ours", booking.Canceled{Reason: "rescheduled", Implied: true}, "", booking.Canceled{Reason: "rescheduled", Implied: true}},
		{"cancel without reason", booking.Canceled{CanceledBy: "host"}, "", booking.Canceled{CanceledBy: "host"}},
		{"a leaving seat's reason", booking.SeatRemoved{Seat: booking.Seat{UID: "s-1"}, Reason: "ill"}, booking.FieldCancelReason, booking.SeatRemoved{Seat: booking.Seat{UID: "s-1"}}},
		{"series cancel keeps no text", booking.SeriesCanceled{Series: "r-1", CanceledBy: "host"}, "", booking.SeriesCanceled{Series: "r-1", CanceledBy: "host"}},
		{"payment codes stay", booking.PaymentFailed{Reason: "card_declined"}, "", booking.PaymentFailed{Reason: "card_declined"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := booking.Event{ID: id, Booking: "calendly-x", Payload: tc.payload}
			stripped, ft, ok := booking.SplitFreeText(e)
			assert.Equal(t, tc.field != "", ok)
			assert.Equal(t, tc.kept, stripped.Payload)
			if !ok {
				return
			}
			assert.Equal(t, booking.FreeText{Booking: "calendly-x", Event: id, Field: tc.field, Text: reasonOf(tc.payload)}, ft)
			assert.Equal(t, e, booking.WithFreeText(stripped, ft), "putting the text back restores the event")
			other := ft
			other.Event = eventlog.EventID{2}
			assert.Equal(t, stripped, booking.WithFreeText(stripped, other), "another event's text is ignored")
		})
	}
}

func reasonOf(p booking.Payload) string {
	switch p := p.(type) {
	case booking.Canceled:
		return p.Reason
	case booking.Rejected:
		return p.Reason
	case booking.SeatRemoved:
		return p.Reason
	}
	return ""
}
