package booking

import "bookingledger/domain/eventlog"

// FreeTextField names a kind of text a person typed that a provider sent with an event.
type FreeTextField string

const (
	// FieldCancelReason is a cancel's reason ("Schedule conflict", or whatever the invitee wrote).
	FieldCancelReason FreeTextField = "cancel_reason"
	// FieldRejectReason is a host's reason for declining a requested booking.
	FieldRejectReason FreeTextField = "reject_reason"
)

// FreeTextFields lists every field: free_texts.field's CHECK list (a test compares them).
var FreeTextFields = []FreeTextField{FieldCancelReason, FieldRejectReason}

// FreeText is a text a person typed, kept apart from the event it came with: events are immutable and
// erasing a person must be able to remove it (ADR 0015). Event names the event it belongs
// to, so a reader can put it back in place.
type FreeText struct {
	Booking ID
	Event   eventlog.EventID
	Field   FreeTextField
	Text    string
}

// SplitFreeText returns e without the text a person may have typed, and that text (ok false when e
// carries none). The one rule of which payload fields are free text: a cancel's and a rejection's
// reason (a leaving seat's too), except the reason of a cancel the ledger inferred itself (Implied: its reason is ours).
// Payment reasons are kept: they are provider codes and provider-written messages, not a person's.
func SplitFreeText(e Event) (Event, FreeText, bool) {
	ft := FreeText{Booking: e.Booking, Event: e.ID}
	switch p := e.Payload.(type) {
	case Canceled:
		if p.Implied || p.Reason == "" {
			return e, FreeText{}, false
		}
		ft.Field, ft.Text = FieldCancelReason, p.Reason
		p.Reason = ""
		e.Payload = p
	case SeatRemoved:
		if p.Reason == "" {
			return e, FreeText{}, false
		}
		ft.Field, ft.Text = FieldCancelReason, p.Reason
		p.Reason = ""
		e.Payload = p
	case Rejected:
		if p.Reason == "" {
			return e, FreeText{}, false
		}
		ft.Field, ft.Text = FieldRejectReason, p.Reason
		p.Reason = ""
		e.Payload = p
	default:
		return e, FreeText{}, false
	}
	return e, ft, true
}

// WithFreeText puts a kept text back into the event it was split from (for readers: history).
// Texts of other events or fields are ignored.
func WithFreeText(e Event, ft FreeText) Event {
	if ft.Event != e.ID {
		return e
	}
	switch p := e.Payload.(type) {
	case Canceled:
		if ft.Field == FieldCancelReason {
			p.Reason = ft.Text
			e.Payload = p
		}
	case SeatRemoved:
		if ft.Field == FieldCancelReason {
			p.Reason = ft.Text
			e.Payload = p
		}
	case Rejected:
		if ft.Field == FieldRejectReason {
			p.Reason = ft.Text
			e.Payload = p
		}
	}
	return e
}
