package eventcodec_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/resource"
)

// TestStoredFormatV1 pins the bytes the ledger stores: every log written so far must decode as it was
// written, so a renamed field, a dropped omitempty or a time not in UTC is a change of format, which
// needs a new event version, not an edit. Times are given in another zone and stored in UTC.
func TestStoredFormatV1(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	at := time.Date(2026, 11, 30, 10, 56, 1, 123456000, cet)
	slot := booking.Slot{Meeting: "m-1", Resources: []string{"host-a", "host-b"}, Start: at.Add(time.Hour), End: at.Add(90 * time.Minute)}
	const slotJSON = `"slot":{"meeting":"m-1","resources":["host-a","host-b"],"start":"2026-11-30T10:56:01.123456Z","end":"2026-11-30T11:26:01.123456Z"}`
	const meta = `{"booking":"calcom-abc","provider":"calcom","provider_ref":"BOOKING_CREATED:abc","occurred_at":"2026-11-30T09:56:01.123456Z"}`
	for _, c := range []struct {
		payload booking.Payload
		data    string
	}{
		{booking.Requested{Slot: slot, Capacity: 3}, `{` + slotJSON + `,"capacity":3}`},
		{booking.Requested{Slot: slot}, `{` + slotJSON + `}`},
		{booking.Scheduled{Slot: slot, Capacity: 1, RescheduledFrom: "calcom-old", PaymentRefs: []string{"stripe:pi_1"}},
			`{` + slotJSON + `,"capacity":1,"rescheduled_from":"calcom-old","payment_refs":["stripe:pi_1"]}`},
		{booking.Scheduled{Slot: slot}, `{` + slotJSON + `}`},
		{booking.Rescheduled{Slot: slot}, `{` + slotJSON + `}`},
		{booking.Canceled{Reason: "sick", CanceledBy: "invitee", RescheduledTo: "calcom-new", Implied: true},
			`{"reason":"sick","canceled_by":"invitee","rescheduled_to":"calcom-new","implied":true}`},
		{booking.Canceled{}, `{}`},
		{booking.Rejected{Reason: "busy"}, `{"reason":"busy"}`},
		{booking.Rejected{}, `{}`},
		{booking.NoShowMarked{}, `{}`},
		{booking.NoShowCleared{}, `{}`},
		{booking.MeetingStarted{}, `{}`},
		{booking.MeetingEnded{}, `{}`},
		{booking.SeatAdded{Slot: slot, Capacity: 3, Seat: booking.Seat{UID: "seat-1", Attendee: "email-sha256:0123456789abcdef"}, PaymentRefs: []string{"stripe:pi_1"}},
			`{` + slotJSON + `,"capacity":3,"seat":{"uid":"seat-1","attendee":"email-sha256:0123456789abcdef"},"payment_refs":["stripe:pi_1"]}`},
		{booking.SeatAdded{Slot: slot, Seat: booking.Seat{Attendee: "email-sha256:0123456789abcdef"}}, `{` + slotJSON + `,"seat":{"attendee":"email-sha256:0123456789abcdef"}}`},
		{booking.SeatRemoved{Seat: booking.Seat{UID: "seat-1"}, Reason: "ill"}, `{"seat":{"uid":"seat-1"},"reason":"ill"}`},
		{booking.SeatRemoved{Seat: booking.Seat{Attendee: "email-sha256:0123456789abcdef"}}, `{"seat":{"attendee":"email-sha256:0123456789abcdef"}}`},
		{booking.SeriesJoined{Series: "rec-1"}, `{"series":"rec-1"}`},
		{booking.SeriesCanceled{Series: "rec-1", CanceledBy: "host"}, `{"series":"rec-1","canceled_by":"host"}`},
		{booking.SeriesCanceled{}, `{}`},
		{booking.PaymentSucceeded{Refs: []string{"stripe:pi_1", "stripe:ch_1"}, Amount: 5000, Currency: "eur"}, `{"refs":["stripe:pi_1","stripe:ch_1"],"amount":5000,"currency":"eur"}`},
		{booking.PaymentFailed{Refs: []string{"stripe:pi_1"}, Reason: "card_declined"}, `{"refs":["stripe:pi_1"],"reason":"card_declined"}`},
		{booking.PaymentRefunded{Refs: []string{"stripe:ch_1"}, Amount: 2500, Currency: "eur"}, `{"refs":["stripe:ch_1"],"amount":2500,"currency":"eur"}`},
		{booking.PaymentDisputed{Refs: []string{"stripe:ch_1"}, Reason: "fraudulent"}, `{"refs":["stripe:ch_1"],"reason":"fraudulent"}`},
	} {
		in := booking.Event{ID: eventlog.EventID{7}, Booking: "calcom-abc", Provider: "calcom", ProviderRef: "BOOKING_CREATED:abc", OccurredAt: at, Payload: c.payload}
		name := string(c.payload.EventType())
		got, err := eventcodec.JSON{}.Encode(in)
		require.NoError(t, err, name)
		assert.Equal(t, name, got.Type)
		assert.JSONEq(t, c.data, string(got.Data), name)
		assert.JSONEq(t, meta, string(got.Metadata), name)

		out, err := eventcodec.JSON{}.Decode(eventlog.RecordedEvent{StreamID: "booking-calcom-abc", Version: 1, ID: in.ID, Type: name, Data: []byte(c.data), Metadata: []byte(meta)})
		require.NoError(t, err, name)
		assert.True(t, out.OccurredAt.Equal(at), name)
		assert.Equal(t, time.UTC, out.OccurredAt.Location(), "%s: decoded in UTC", name)
		assert.Equal(t, utc(in), out, name)
	}
	got, err := eventcodec.JSON{}.Encode(booking.Event{Booking: "calcom-abc", Provider: "calcom", OccurredAt: at, Payload: booking.MeetingEnded{}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"booking":"calcom-abc","provider":"calcom","occurred_at":"2026-11-30T09:56:01.123456Z"}`, string(got.Metadata), "no provider reference: none stored")
}

// utc is e with its times in UTC, as stored.
func utc(e booking.Event) booking.Event {
	e.OccurredAt = e.OccurredAt.UTC()
	switch p := e.Payload.(type) {
	case booking.Requested:
		p.Slot.Start, p.Slot.End = p.Slot.Start.UTC(), p.Slot.End.UTC()
		e.Payload = p
	case booking.Scheduled:
		p.Slot.Start, p.Slot.End = p.Slot.Start.UTC(), p.Slot.End.UTC()
		e.Payload = p
	case booking.Rescheduled:
		p.Slot.Start, p.Slot.End = p.Slot.Start.UTC(), p.Slot.End.UTC()
		e.Payload = p
	case booking.SeatAdded:
		p.Slot.Start, p.Slot.End = p.Slot.Start.UTC(), p.Slot.End.UTC()
		e.Payload = p
	}
	return e
}

// TestMetadataWithoutABookingNamesTheStreams: metadata written without the booking (and without a
// provider reference) decodes with the booking its stream names.
func TestMetadataWithoutABookingNamesTheStreams(t *testing.T) {
	e, err := eventcodec.JSON{}.Decode(eventlog.RecordedEvent{StreamID: "booking-calendly-a1", Version: 1, Type: string(booking.TypeRejected),
		Data: []byte(`{}`), Metadata: []byte(`{"provider":"calendly","occurred_at":"2026-11-30T09:56:01Z"}`)})
	require.NoError(t, err)
	assert.Equal(t, booking.ID("calendly-a1"), e.Booking)
	assert.Empty(t, e.ProviderRef)

	e, err = eventcodec.JSON{}.Decode(eventlog.RecordedEvent{StreamID: "links", Version: 1, Type: string(booking.TypeRejected),
		Data: []byte(`{}`), Metadata: []byte(`{"provider":"calendly","occurred_at":"2026-11-30T09:56:01Z"}`)})
	require.NoError(t, err)
	assert.Empty(t, e.Booking, "a stream that names no booking leaves it empty")
}

// TestResourceEventsStoredFormatV1: link events are stored with their time in UTC and empty metadata;
// anything but a link or an unlink is refused both ways.
func TestResourceEventsStoredFormatV1(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 56, 1, 123456000, time.FixedZone("CET", 3600))
	const data = `{"name":"dr-smith","resources":["a","b"],"by":"ops","at":"2026-11-30T09:56:01.123456Z"}`
	for _, typ := range []resource.EventType{resource.TypeLinked, resource.TypeUnlinked} {
		in := resource.Event{ID: eventlog.EventID{9}, Type: typ, Name: "dr-smith", Resources: []string{"a", "b"}, By: "ops", At: at}
		got, err := eventcodec.JSON{}.EncodeResource(in)
		require.NoError(t, err)
		assert.Equal(t, string(typ), got.Type)
		assert.Equal(t, in.ID, got.ID)
		assert.JSONEq(t, data, string(got.Data))
		assert.JSONEq(t, `{}`, string(got.Metadata))
		out, err := eventcodec.JSON{}.DecodeResource(eventlog.RecordedEvent{StreamID: resource.Stream, Version: 1, ID: in.ID, Type: string(typ), Data: []byte(data)})
		require.NoError(t, err)
		in.At = at.UTC()
		assert.Equal(t, in, out)
	}
	_, err := eventcodec.JSON{}.EncodeResource(resource.Event{Type: "resource.renamed.v1"})
	assert.ErrorIs(t, err, eventcodec.ErrUnknownType)
	_, err = eventcodec.JSON{}.DecodeResource(eventlog.RecordedEvent{Type: string(booking.TypeScheduled), Data: []byte(`{}`)})
	assert.ErrorIs(t, err, eventcodec.ErrUnknownType)
	_, err = eventcodec.JSON{}.DecodeResource(eventlog.RecordedEvent{Type: string(resource.TypeLinked), Data: []byte(`{"name":`)})
	assert.Error(t, err)
	assert.NotErrorIs(t, err, eventcodec.ErrUnknownType)
}
