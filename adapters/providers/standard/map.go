package standard

import (
	"encoding/json"
	"slices"
	"strings"

	"bookingledger/adapters/providers"
	"bookingledger/domain/booking"
)

// Payload types of the bookingledger convention.
const (
	TypeScheduled     = "booking.scheduled"
	TypeRequested     = "booking.requested"
	TypeRescheduled   = "booking.rescheduled"
	TypeCanceled      = "booking.canceled"
	TypeRejected      = "booking.rejected"
	TypeNoShowMarked  = "booking.no_show_marked"
	TypeNoShowCleared = "booking.no_show_cleared"
)

// BookingPrefix starts the booking ID of every Standard Webhooks booking.
const BookingPrefix = "standard-"

// Message is the bookingledger payload convention on Standard Webhooks: the recommended
// {type, timestamp, data} shape. Senders (and the send command) may marshal it directly.
type Message struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"` // RFC 3339 time of the change
	Data      Data   `json:"data"`
}

// Data is the booking a message is about. Booking, RescheduledFrom and RescheduledTo are the
// sender's own keys; the ledger prefixes them with "standard-".
type Data struct {
	Booking         string   `json:"booking"`
	Meeting         string   `json:"meeting,omitempty"`
	Resources       []string `json:"resources,omitempty"`
	Start           string   `json:"start,omitempty"`
	End             string   `json:"end,omitempty"`
	Capacity        int      `json:"capacity,omitempty"`
	Reason          string   `json:"reason,omitempty"`
	CanceledBy      string   `json:"canceled_by,omitempty"`
	RescheduledFrom string   `json:"rescheduled_from,omitempty"`
	RescheduledTo   string   `json:"rescheduled_to,omitempty"`
	PaymentRefs     []string `json:"payment_refs,omitempty"`
}

// mapBody maps one message. The event ID derives from webhook-id (stable across retries), which is
// also the ProviderRef and the delivery ID; OccurredAt is the payload timestamp, never the attempt's
// webhook-timestamp (that changes on every retry).
func mapBody(webhookID string, body []byte) (providers.Mapped, error) {
	if err := providers.Token(HeaderID, webhookID); err != nil {
		return providers.Mapped{}, err
	}
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		return providers.Mapped{}, providers.Unmappable("standard webhooks body is not a {type, timestamp, data} message: %v", err)
	}
	if err := providers.Token("type", m.Type); err != nil {
		return providers.Mapped{}, err
	}
	out := providers.Mapped{DeliveryID: webhookID}
	switch m.Type {
	case TypeScheduled, TypeRequested, TypeRescheduled, TypeCanceled, TypeRejected, TypeNoShowMarked, TypeNoShowCleared:
	default:
		out.Reason = "standard webhook type " + m.Type + " not mapped"
		return out, nil
	}
	at, err := providers.ParseTime("timestamp", m.Timestamp)
	if err != nil {
		return providers.Mapped{}, err
	}
	id, err := ref("data.booking", m.Data.Booking)
	if err != nil {
		return providers.Mapped{}, err
	}
	d := m.Data
	var payload booking.Payload
	switch m.Type {
	case TypeScheduled, TypeRequested, TypeRescheduled:
		s, err := slot(id, d)
		if err != nil {
			return providers.Mapped{}, err
		}
		capacity, err := providers.Capacity("data.capacity", d.Capacity)
		if err != nil {
			return providers.Mapped{}, err
		}
		switch m.Type {
		case TypeRequested:
			payload = booking.Requested{Slot: s, Capacity: capacity}
		case TypeRescheduled:
			payload = booking.Rescheduled{Slot: s}
		default:
			p := booking.Scheduled{Slot: s, Capacity: capacity}
			if d.RescheduledFrom != "" {
				if p.RescheduledFrom, err = ref("data.rescheduled_from", d.RescheduledFrom); err != nil {
					return providers.Mapped{}, err
				}
				if p.RescheduledFrom == id {
					return providers.Mapped{}, providers.Unmappable("data.rescheduled_from is the booking itself")
				}
			}
			for _, r := range d.PaymentRefs {
				if err := providers.Token("data.payment_refs[]", r); err != nil {
					return providers.Mapped{}, err
				}
				p.PaymentRefs = append(p.PaymentRefs, r)
			}
			payload = p
		}
	case TypeCanceled:
		p := booking.Canceled{Reason: strings.TrimSpace(d.Reason), CanceledBy: d.CanceledBy}
		switch d.CanceledBy {
		case "", "host", "invitee", "provider":
		default:
			return providers.Mapped{}, providers.Unmappable("data.canceled_by %q is not host, invitee or provider", d.CanceledBy)
		}
		if d.RescheduledTo != "" {
			if p.RescheduledTo, err = ref("data.rescheduled_to", d.RescheduledTo); err != nil {
				return providers.Mapped{}, err
			}
			if p.RescheduledTo == id {
				return providers.Mapped{}, providers.Unmappable("data.rescheduled_to is the booking itself")
			}
		}
		payload = p
	case TypeRejected:
		payload = booking.Rejected{Reason: strings.TrimSpace(d.Reason)}
	case TypeNoShowMarked:
		payload = booking.NoShowMarked{}
	case TypeNoShowCleared:
		payload = booking.NoShowCleared{}
	}
	out.Events = []booking.Event{{
		ID:          providers.EventID(Name, webhookID),
		Booking:     id,
		Provider:    Name,
		ProviderRef: webhookID,
		OccurredAt:  at,
		Payload:     payload,
	}}
	return out, nil
}

// ref turns a sender's booking key into "standard-<key>".
func ref(field, key string) (booking.ID, error) {
	if err := providers.Token(field, key); err != nil {
		return "", err
	}
	id := booking.ID(BookingPrefix + key)
	if err := id.Validate(); err != nil {
		return "", providers.Unmappable("%s: %v", field, err)
	}
	return id, nil
}

// slot reads the slot. Meeting defaults to the booking ID (a booking of its own, never a group);
// meeting and resources are taken as the sender names them, so a sender can name the same host
// calendars as another provider (a Calendly user URI, "calcom-user-<id>") to share conflict detection.
func slot(id booking.ID, d Data) (booking.Slot, error) {
	meeting := d.Meeting
	if meeting == "" {
		meeting = string(id)
	}
	if err := providers.Token("data.meeting", meeting); err != nil {
		return booking.Slot{}, err
	}
	var resources []string
	for _, r := range d.Resources {
		if err := providers.Token("data.resources[]", r); err != nil {
			return booking.Slot{}, err
		}
		if !slices.Contains(resources, r) {
			resources = append(resources, r)
		}
	}
	if len(resources) == 0 {
		return booking.Slot{}, providers.Unmappable("data.resources names no resource")
	}
	start, err := providers.ParseTime("data.start", d.Start)
	if err != nil {
		return booking.Slot{}, err
	}
	end, err := providers.ParseTime("data.end", d.End)
	if err != nil {
		return booking.Slot{}, err
	}
	s := booking.Slot{Meeting: meeting, Resources: resources, Start: start, End: end}
	if err := s.Validate(); err != nil {
		return booking.Slot{}, providers.Unmappable("%v", err)
	}
	return s, nil
}
