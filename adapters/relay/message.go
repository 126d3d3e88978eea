package relay

import (
	"context"
	"fmt"

	"bookingledger/domain/eventlog"
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
// (projections/relay.StreamMessage).
func (r *Relay) buildMessage(ctx context.Context, stream string, version uint64) (Message, eventlog.RecordedEvent, error) {
	recs, err := r.events.ReadStream(ctx, stream)
	if err != nil {
		return Message{}, eventlog.RecordedEvent{}, fmt.Errorf("read %s: %w", stream, err)
	}
	return prelay.StreamMessage(recs, stream, version, r.codec)
}
