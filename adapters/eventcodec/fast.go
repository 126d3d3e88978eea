package eventcodec

import (
	"strconv"
	"time"
	"unicode/utf8"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
)

// A rebuild decodes every event of the log, and encoding/json (reflection, a validating pre-pass)
// was most of its CPU. decodeFast reads the shapes Encode writes with a small scanner and gives up
// (ok == false) on anything it is not sure to read exactly as encoding/json would: escapes in strings,
// invalid UTF-8, unknown or differently cased keys, null where a scalar is expected, numbers with a
// fraction or an exponent, trailing bytes. Decode then takes the encoding/json path, which also
// produces the errors, so the fast path never changes a result, only its cost.

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next skips white space and consumes c.
func (s *scanner) next(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *scanner) peek(c byte) bool {
	s.ws()
	return s.i < len(s.b) && s.b[s.i] == c
}

// rawString returns the bytes of a string without escapes.
func (s *scanner) rawString() ([]byte, bool) {
	if !s.next('"') {
		return nil, false
	}
	start, high := s.i, false
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			if high && !utf8.Valid(v) {
				return nil, false // encoding/json replaces invalid bytes with U+FFFD
			}
			return v, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			high = true
		}
		s.i++
	}
	return nil, false
}

func (s *scanner) str() (string, bool) {
	v, ok := s.rawString()
	return string(v), ok
}

func (s *scanner) null() bool {
	s.ws()
	if len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// strs reads an array of strings; null is a nil slice and [] an empty one, as with encoding/json.
func (s *scanner) strs() ([]string, bool) {
	if s.null() {
		return nil, true
	}
	if !s.next('[') {
		return nil, false
	}
	out := []string{}
	if s.next(']') {
		return out, true
	}
	for {
		v, ok := s.str()
		if !ok {
			return nil, false
		}
		out = append(out, v)
		if s.next(']') {
			return out, true
		}
		if !s.next(',') {
			return nil, false
		}
	}
}

func (s *scanner) integer() (int64, bool) {
	s.ws()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == digits || (s.b[digits] == '0' && s.i-digits > 1) {
		return 0, false
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	return n, err == nil
}

func (s *scanner) boolean() (bool, bool) {
	s.ws()
	switch {
	case len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "true":
		s.i += 4
		return true, true
	case len(s.b)-s.i >= 5 && string(s.b[s.i:s.i+5]) == "false":
		s.i += 5
		return false, true
	}
	return false, false
}

func (s *scanner) time() (time.Time, bool) {
	v, ok := s.rawString()
	if !ok {
		return time.Time{}, false
	}
	var t time.Time
	// time.Time's UnmarshalJSON parses the unquoted text exactly as UnmarshalText does.
	if err := t.UnmarshalText(v); err != nil {
		return time.Time{}, false
	}
	return t, true
}

// object reads an object, calling field for each key; field reads the value and reports success.
func (s *scanner) object(field func(key []byte) bool) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	for {
		k, ok := s.rawString()
		if !ok || !s.next(':') || !field(k) {
			return false
		}
		if s.next('}') {
			return true
		}
		if !s.next(',') {
			return false
		}
	}
}

// whole reads b as one top-level object and nothing after it.
func (s *scanner) whole(b []byte, field func(key []byte) bool) bool {
	s.b, s.i = b, 0
	if !s.object(field) {
		return false
	}
	s.ws()
	return s.i == len(s.b)
}

func (s *scanner) slot(d *slotV1) bool {
	return s.object(func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "meeting":
			d.Meeting, ok = s.str()
		case "resources":
			d.Resources, ok = s.strs()
		case "start":
			d.Start, ok = s.time()
		case "end":
			d.End, ok = s.time()
		}
		return ok
	})
}

// decodeFast is Decode for the shapes Encode writes; ok is false when Decode must take the
// encoding/json path.
func decodeFast(r eventlog.RecordedEvent) (booking.Event, bool) {
	var (
		s scanner
		m metaV1
	)
	if !s.whole(r.Metadata, func(k []byte) bool {
		var ok bool
		switch string(k) {
		case "booking":
			m.Booking, ok = s.str()
		case "provider":
			m.Provider, ok = s.str()
		case "provider_ref":
			m.ProviderRef, ok = s.str()
		case "occurred_at":
			m.OccurredAt, ok = s.time()
		}
		return ok
	}) {
		return booking.Event{}, false
	}
	e := booking.Event{ID: r.ID, Booking: booking.ID(m.Booking), Provider: m.Provider, ProviderRef: m.ProviderRef, OccurredAt: m.OccurredAt}
	if e.Booking == "" {
		if id, ok := booking.FromStream(r.StreamID); ok {
			e.Booking = id
		}
	}
	var ok bool
	switch booking.EventType(r.Type) {
	case booking.TypeRequested:
		var d requestedV1
		ok = s.whole(r.Data, func(k []byte) bool {
			switch string(k) {
			case "slot":
				return s.slot(&d.Slot)
			case "capacity":
				n, ok := s.integer()
				d.Capacity = int(n)
				return ok
			}
			return false
		})
		e.Payload = booking.Requested{Slot: d.Slot.domain(), Capacity: d.Capacity}
	case booking.TypeScheduled:
		var d scheduledV1
		ok = s.whole(r.Data, func(k []byte) bool {
			var ok bool
			switch string(k) {
			case "slot":
				ok = s.slot(&d.Slot)
			case "capacity":
				var n int64
				n, ok = s.integer()
				d.Capacity = int(n)
			case "rescheduled_from":
				d.RescheduledFrom, ok = s.str()
			case "payment_refs":
				d.PaymentRefs, ok = s.strs()
			}
			return ok
		})
		e.Payload = booking.Scheduled{Slot: d.Slot.domain(), Capacity: d.Capacity, RescheduledFrom: booking.ID(d.RescheduledFrom), PaymentRefs: d.PaymentRefs}
	case booking.TypeRescheduled:
		var d rescheduledV1
		ok = s.whole(r.Data, func(k []byte) bool { return string(k) == "slot" && s.slot(&d.Slot) })
		e.Payload = booking.Rescheduled{Slot: d.Slot.domain()}
	case booking.TypeCanceled:
		var d canceledV1
		ok = s.whole(r.Data, func(k []byte) bool {
			var ok bool
			switch string(k) {
			case "reason":
				d.Reason, ok = s.str()
			case "canceled_by":
				d.CanceledBy, ok = s.str()
			case "rescheduled_to":
				d.RescheduledTo, ok = s.str()
			case "implied":
				d.Implied, ok = s.boolean()
			}
			return ok
		})
		e.Payload = booking.Canceled{Reason: d.Reason, CanceledBy: d.CanceledBy, RescheduledTo: booking.ID(d.RescheduledTo), Implied: d.Implied}
	case booking.TypePaymentSucceeded, booking.TypePaymentFailed, booking.TypePaymentRefunded, booking.TypePaymentDisputed:
		var d paymentV1
		ok = s.whole(r.Data, func(k []byte) bool {
			var ok bool
			switch string(k) {
			case "refs":
				d.Refs, ok = s.strs()
			case "amount":
				d.Amount, ok = s.integer()
			case "currency":
				d.Currency, ok = s.str()
			case "reason":
				d.Reason, ok = s.str()
			}
			return ok
		})
		switch booking.EventType(r.Type) {
		case booking.TypePaymentSucceeded:
			e.Payload = booking.PaymentSucceeded{Refs: d.Refs, Amount: d.Amount, Currency: d.Currency}
		case booking.TypePaymentFailed:
			e.Payload = booking.PaymentFailed{Refs: d.Refs, Reason: d.Reason}
		case booking.TypePaymentRefunded:
			e.Payload = booking.PaymentRefunded{Refs: d.Refs, Amount: d.Amount, Currency: d.Currency}
		default:
			e.Payload = booking.PaymentDisputed{Refs: d.Refs, Reason: d.Reason}
		}
	case booking.TypeRejected:
		var d rejectedV1
		ok = s.whole(r.Data, func(k []byte) bool {
			var ok bool
			if string(k) == "reason" {
				d.Reason, ok = s.str()
			}
			return ok
		})
		e.Payload = booking.Rejected{Reason: d.Reason}
	case booking.TypeNoShowMarked, booking.TypeNoShowCleared, booking.TypeMeetingStarted, booking.TypeMeetingEnded:
		return booking.Event{}, false // no body to read: the encoding/json path costs only the metadata
	default:
		return booking.Event{}, false // unknown: the encoding/json path returns the error
	}
	if !ok {
		return booking.Event{}, false
	}
	return e, true
}
