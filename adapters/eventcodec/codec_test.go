package eventcodec_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
)

func TestRoundTripEveryType(t *testing.T) {
	at := time.Date(2026, 11, 30, 9, 56, 1, 123456000, time.UTC)
	slot := booking.Slot{Meeting: "m-1", Resources: []string{"host-a", "host-b"}, Start: at.Add(time.Hour), End: at.Add(90 * time.Minute)}
	payloads := []booking.Payload{
		booking.Requested{Slot: slot, Capacity: 3},
		booking.Scheduled{Slot: slot, Capacity: 1, RescheduledFrom: "calcom-old", PaymentRefs: []string{"stripe:pi_1"}},
		booking.Rescheduled{Slot: slot},
		booking.Canceled{Reason: "sick", CanceledBy: "invitee", RescheduledTo: "calcom-new", Implied: true},
		booking.Rejected{Reason: "busy"},
		booking.NoShowMarked{},
		booking.NoShowCleared{},
		booking.MeetingStarted{},
		booking.MeetingEnded{},
		booking.PaymentSucceeded{Refs: []string{"stripe:pi_1", "stripe:ch_1"}, Amount: 5000, Currency: "eur"},
		booking.PaymentFailed{Refs: []string{"stripe:pi_1"}, Reason: "card_declined"},
		booking.PaymentRefunded{Refs: []string{"stripe:ch_1"}, Amount: 2500, Currency: "eur"},
		booking.PaymentDisputed{Refs: []string{"stripe:ch_1"}, Reason: "fraudulent"},
	}
	codec := eventcodec.JSON{}
	for i, p := range payloads {
		t.Run(string(p.EventType()), func(t *testing.T) {
			in := booking.Event{
				ID: eventlog.EventID{byte(i + 1)}, Booking: "calcom-abc", Provider: "calcom",
				ProviderRef: "BOOKING_CREATED:abc", OccurredAt: at, Payload: p,
			}
			data, err := codec.Encode(in)
			require.NoError(t, err)
			assert.Equal(t, string(p.EventType()), data.Type)
			assert.Equal(t, in.ID, data.ID)
			out, err := codec.Decode(eventlog.RecordedEvent{StreamID: in.Booking.Stream(), Version: 1, ID: data.ID, Type: data.Type, Data: data.Data, Metadata: data.Metadata})
			require.NoError(t, err)
			assert.Equal(t, in, out)
		})
	}
}

func TestDecodeRejectsUnknownAndMalformed(t *testing.T) {
	codec := eventcodec.JSON{}
	meta := []byte(`{"booking":"x","provider":"p","occurred_at":"2026-01-01T00:00:00Z"}`)
	_, err := codec.Decode(eventlog.RecordedEvent{Type: "booking.unknown.v9", Metadata: meta, Data: []byte(`{}`)})
	assert.ErrorIs(t, err, eventcodec.ErrUnknownType)
	_, err = codec.Decode(eventlog.RecordedEvent{Type: string(booking.TypeScheduled), Metadata: meta, Data: []byte(`{"slot":`)})
	assert.Error(t, err)
	_, err = codec.Decode(eventlog.RecordedEvent{Type: string(booking.TypeScheduled), Metadata: []byte(`nope`), Data: []byte(`{}`)})
	assert.Error(t, err)
}
