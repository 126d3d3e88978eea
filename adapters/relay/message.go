package relay

import (
	"context"
	"fmt"

	"bookingledger/domain/eventlog"
	"bookingledger/domain/resource"
	prelay "bookingledger/projections/relay"
)

// The message's wire format is projections/relay's (docs/relay.md, "The message").
type (
	Message      = prelay.Message
	MessageData  = prelay.MessageData
	LinksState   = prelay.LinksState
	EventDTO     = prelay.EventDTO
	SlotDTO      = prelay.SlotDTO
	FindingDTO   = prelay.FindingDTO
	BookingState = prelay.BookingState
)

// WebhookID is the message id of an event: the same for every attempt, replay and endpoint.
func WebhookID(event eventlog.EventID) string { return prelay.WebhookID(event) }

// buildMessage reads the delivery's stream and folds it up to the delivery's version
// (projections/relay.BookingMessage, LinkMessage). The stream's prefix never changes, so neither does
// the message.
func (r *Relay) buildMessage(ctx context.Context, stream string, version uint64) (Message, eventlog.RecordedEvent, error) {
	recs, err := r.events.ReadStream(ctx, stream)
	if err != nil {
		return Message{}, eventlog.RecordedEvent{}, fmt.Errorf("read %s: %w", stream, err)
	}
	if version == 0 || uint64(len(recs)) < version {
		return Message{}, eventlog.RecordedEvent{}, fmt.Errorf("%s has %d events, not version %d", stream, len(recs), version)
	}
	recs = recs[:version]
	var m Message
	if stream == resource.Stream {
		events, err := decodeAll(recs, r.codec.DecodeResource)
		if err != nil {
			return Message{}, eventlog.RecordedEvent{}, err
		}
		m = prelay.LinkMessage(recs, events)
	} else {
		events, err := decodeAll(recs, r.codec.Decode)
		if err != nil {
			return Message{}, eventlog.RecordedEvent{}, err
		}
		m = prelay.BookingMessage(recs, events)
	}
	return m, recs[version-1], nil
}

// decodeAll decodes recs with decode: the codec's Decode (a booking's) or DecodeResource (links).
func decodeAll[E any](recs []eventlog.RecordedEvent, decode func(eventlog.RecordedEvent) (E, error)) ([]E, error) {
	out := make([]E, 0, len(recs))
	for _, rec := range recs {
		e, err := decode(rec)
		if err != nil {
			return nil, fmt.Errorf("decode %s@%d: %w", rec.StreamID, rec.Version, err)
		}
		out = append(out, e)
	}
	return out, nil
}
