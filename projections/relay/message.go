package relay

import (
	"encoding/json"
	"time"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/resource"
)

// Message is the body of every relay delivery (docs/relay.md, "The message"). Its fields are the wire format:
// change them only by adding.
type Message struct {
	Type      string      `json:"type"`
	Timestamp time.Time   `json:"timestamp"`
	Data      MessageData `json:"data"`
}

// MessageData says what happened and what its stream is after it. A receiver stores Version with
// the state and applies a message only when its version is higher: one guard, correct under any
// arrival order, duplicates included.
type MessageData struct {
	// Booking is the booking of a booking's event; a link event has none.
	Booking string
	Stream  string
	// Version is the event's 1-based position in its stream.
	Version uint64
	Event   EventDTO
	// State is the booking's state after a booking's event.
	State BookingState
	// Links is the calendar's resource links after a link event (resource.Stream's), sent as "state"
	// in place of State.
	Links *LinksState
	// SkippedVersions, on an ordered endpoint, are the earlier versions of the stream that went dead
	// since the last one the endpoint took: the receiver never got them (sent as "skipped_versions",
	// only when there are some).
	SkippedVersions []uint64
}

// LinksState is the fold of the link stream up to and including the message's version.
type LinksState struct {
	// Links maps every linked provider identifier to its canonical name.
	Links map[string]string `json:"links"`
	// Events is how many link events were folded: the message's version.
	Events int `json:"events"`
}

// messageDataJSON is MessageData on the wire: "state" is the state of the message's stream, whichever
// kind it is.
type messageDataJSON struct {
	Booking string          `json:"booking,omitempty"`
	Stream  string          `json:"stream"`
	Version uint64          `json:"version"`
	Event   EventDTO        `json:"event"`
	State   json.RawMessage `json:"state"`
	Skipped []uint64        `json:"skipped_versions,omitempty"`
}

// MarshalJSON writes Links, if set, as "state", State otherwise.
func (d MessageData) MarshalJSON() ([]byte, error) {
	var state any = d.State
	if d.Links != nil {
		state = d.Links
	}
	b, err := json.Marshal(state)
	if err != nil {
		return nil, err
	}
	return json.Marshal(messageDataJSON{Booking: d.Booking, Stream: d.Stream, Version: d.Version, Event: d.Event, State: b, Skipped: d.SkippedVersions})
}

// UnmarshalJSON reads "state" as Links for the link stream, as State for any other.
func (d *MessageData) UnmarshalJSON(b []byte) error {
	var w messageDataJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*d = MessageData{Booking: w.Booking, Stream: w.Stream, Version: w.Version, Event: w.Event, SkippedVersions: w.Skipped}
	if len(w.State) == 0 || string(w.State) == "null" {
		return nil
	}
	if w.Stream == resource.Stream {
		d.Links = &LinksState{}
		return json.Unmarshal(w.State, d.Links)
	}
	return json.Unmarshal(w.State, &d.State)
}

// EventDTO is the event as stored: its payload is the ledger's versioned wire format of its type.
type EventDTO struct {
	ID         string          `json:"id"`
	Type       string          `json:"type"`
	Provider   string          `json:"provider,omitempty"`
	OccurredAt time.Time       `json:"occurred_at"`
	RecordedAt time.Time       `json:"recorded_at"`
	Payload    json.RawMessage `json:"payload"`
}

// SlotDTO is a booking's slot.
type SlotDTO struct {
	Meeting   string    `json:"meeting"`
	Resources []string  `json:"resources"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
}

// FindingDTO is an event that changed nothing, and why.
type FindingDTO struct {
	Event  string `json:"event"`
	Type   string `json:"type"`
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// BookingState is the fold of the stream's events up to and including the message's version.
type BookingState struct {
	Booking         string       `json:"booking"`
	Provider        string       `json:"provider"`
	Status          string       `json:"status"`
	Slot            *SlotDTO     `json:"slot,omitempty"`
	Capacity        int          `json:"capacity,omitempty"`
	UpdatedAt       *time.Time   `json:"updated_at,omitempty"`
	RescheduledFrom string       `json:"rescheduled_from,omitempty"`
	RescheduledTo   string       `json:"rescheduled_to,omitempty"`
	CancelReason    string       `json:"cancel_reason,omitempty"`
	CanceledBy      string       `json:"canceled_by,omitempty"`
	NoShow          bool         `json:"no_show"`
	Payment         string       `json:"payment,omitempty"`
	PaymentRefs     []string     `json:"payment_refs,omitempty"`
	Events          int          `json:"events"`
	Findings        []FindingDTO `json:"findings,omitempty"`
}

// ToState is the wire form of a booking's state.
func ToState(s booking.State) BookingState {
	out := BookingState{Booking: string(s.Booking), Provider: s.Provider, Status: string(s.Status),
		Capacity: s.Capacity, RescheduledFrom: string(s.RescheduledFrom), RescheduledTo: string(s.RescheduledTo),
		CancelReason: s.CancelReason, CanceledBy: s.CanceledBy, NoShow: s.NoShow, Payment: string(s.Payment),
		PaymentRefs: s.PaymentRefs, Events: s.Events}
	if s.HasSlot() {
		out.Slot = &SlotDTO{Meeting: s.Slot.Meeting, Resources: s.Slot.Resources, Start: s.Slot.Start.UTC(), End: s.Slot.End.UTC()}
	}
	if !s.UpdatedAt.IsZero() {
		t := s.UpdatedAt.UTC()
		out.UpdatedAt = &t
	}
	for _, f := range s.Findings {
		out.Findings = append(out.Findings, FindingDTO{Event: f.Event.String(), Type: string(f.Type), Code: string(f.Code), Reason: f.Reason})
	}
	return out
}

// WebhookID is the message id of an event: the same for every attempt, replay and endpoint, so a
// receiver deduplicates by it.
func WebhookID(event eventlog.EventID) string { return "msg_" + event.String() }

// BookingMessage is the message of the last of recs, a prefix of a booking's stream whose events
// decode to events (one each): the event and the booking's state after it. The same prefix gives the
// same message, on every attempt.
func BookingMessage(recs []eventlog.RecordedEvent, events []booking.Event) Message {
	rec, ev := recs[len(recs)-1], events[len(events)-1]
	b, _ := booking.FromStream(rec.StreamID)
	return Message{Type: rec.Type, Timestamp: rec.RecordedAt.UTC(), Data: MessageData{
		Booking: string(b), Stream: rec.StreamID, Version: rec.Version,
		Event: EventDTO{ID: rec.ID.String(), Type: rec.Type, Provider: ev.Provider, OccurredAt: ev.OccurredAt.UTC(),
			RecordedAt: rec.RecordedAt.UTC(), Payload: json.RawMessage(rec.Data)},
		State: ToState(booking.Fold(events)),
	}}
}

// LinkMessage is the message of the last of recs, a prefix of the link stream whose events decode to
// events: the event, its time (when the link was made) and the links after it.
func LinkMessage(recs []eventlog.RecordedEvent, events []resource.Event) Message {
	rec, ev := recs[len(recs)-1], events[len(events)-1]
	return Message{Type: rec.Type, Timestamp: rec.RecordedAt.UTC(), Data: MessageData{
		Stream: rec.StreamID, Version: rec.Version,
		Event: EventDTO{ID: rec.ID.String(), Type: rec.Type, OccurredAt: ev.At.UTC(), RecordedAt: rec.RecordedAt.UTC(),
			Payload: json.RawMessage(rec.Data)},
		Links: &LinksState{Links: resource.Fold(events).Links(), Events: len(events)},
	}}
}
