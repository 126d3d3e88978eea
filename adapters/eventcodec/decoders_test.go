package eventcodec

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	gojson "github.com/goccy/go-json"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
)

// Decode reads stored events with goccy/go-json rather than encoding/json, which wrote them. These
// tests hold the two to the same answers: every document encoding/json decodes must decode to the same
// event with goccy/go-json.

// agree decodes r with both decoders and fails unless goccy/go-json gives encoding/json's answer.
// Nothing is required of documents Encode never writes: those encoding/json refuses, and those that
// are not valid UTF-8 (encoding/json writes only valid UTF-8; reading raw invalid bytes inside a
// string, it substitutes U+FFFD where goccy/go-json keeps the bytes — the fuzzer's first find).
func agree(t *testing.T, r eventlog.RecordedEvent) {
	t.Helper()
	if !utf8.Valid(r.Metadata) || !utf8.Valid(r.Data) {
		return
	}
	want, err := decode(r, json.Unmarshal)
	if err != nil {
		return
	}
	got, err := decode(r, gojson.Unmarshal)
	require.NoError(t, err, "goccy/go-json refused what encoding/json decoded: type %q\nmetadata %q\ndata %q", r.Type, r.Metadata, r.Data)
	assert.Equal(t, want, got, "type %q\nmetadata %q\ndata %q", r.Type, r.Metadata, r.Data)
}

// tricky are strings that stress a JSON string decoder: escapes, non-ASCII, separators JSON allows
// raw but JavaScript does not, invalid UTF-8 (encoding/json writes U+FFFD for it).
var tricky = []string{
	"", "plain", `quote " and backslash \`, "tab\tnewline\nreturn\r", "\u2028\u2029", "é ü ß 日本 🙂",
	"<script>&amp;", "\x00\x01\x1f", "bad utf-8 \xff\xfe", strings.Repeat("long ", 200),
}

func randomString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		return tricky[r.IntN(len(tricky))]
	}
	b := make([]rune, r.IntN(24))
	for i := range b {
		b[i] = rune(0x20 + r.IntN(0x3000))
	}
	return string(b)
}

func randomStrings(r *rand.Rand) []string {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	out := make([]string, 1+r.IntN(4))
	for i := range out {
		out[i] = randomString(r)
	}
	return out
}

func randomTime(r *rand.Rand) time.Time {
	return time.Unix(r.Int64N(4_000_000_000), r.Int64N(1_000_000_000)).UTC()
}

func randomEvent(r *rand.Rand) booking.Event {
	slot := booking.Slot{Meeting: randomString(r), Resources: randomStrings(r), Start: randomTime(r), End: randomTime(r)}
	payloads := []booking.Payload{
		booking.Requested{Slot: slot, Capacity: r.IntN(10)},
		booking.Scheduled{Slot: slot, Capacity: r.IntN(10), RescheduledFrom: booking.ID(randomString(r)), PaymentRefs: randomStrings(r)},
		booking.Rescheduled{Slot: slot},
		booking.Canceled{Reason: randomString(r), CanceledBy: randomString(r), RescheduledTo: booking.ID(randomString(r)), Implied: r.IntN(2) == 0},
		booking.Rejected{Reason: randomString(r)},
		booking.NoShowMarked{}, booking.NoShowCleared{}, booking.MeetingStarted{}, booking.MeetingEnded{},
		booking.PaymentSucceeded{Refs: randomStrings(r), Amount: r.Int64N(1 << 40), Currency: randomString(r)},
		booking.PaymentFailed{Refs: randomStrings(r), Reason: randomString(r)},
		booking.PaymentRefunded{Refs: randomStrings(r), Amount: r.Int64N(1 << 40), Currency: randomString(r)},
		booking.PaymentDisputed{Refs: randomStrings(r), Reason: randomString(r)},
		booking.SeatAdded{Slot: slot, Capacity: r.IntN(10), Seat: booking.Seat{UID: randomString(r), Attendee: randomString(r)}, PaymentRefs: randomStrings(r)},
		booking.SeatRemoved{Seat: booking.Seat{UID: randomString(r), Attendee: randomString(r)}, Reason: randomString(r)},
		booking.SeriesJoined{Series: randomString(r)},
		booking.SeriesCanceled{Series: randomString(r), CanceledBy: randomString(r)},
	}
	var id eventlog.EventID
	for i := range id {
		id[i] = byte(r.IntN(256))
	}
	return booking.Event{ID: id, Booking: booking.ID(randomString(r)), Provider: randomString(r),
		ProviderRef: randomString(r), OccurredAt: randomTime(r), Payload: payloads[r.IntN(len(payloads))]}
}

func recorded(t testing.TB, e booking.Event) eventlog.RecordedEvent {
	t.Helper()
	d, err := JSON{}.Encode(e)
	require.NoError(t, err)
	return eventlog.RecordedEvent{StreamID: "booking-x", Version: 1, ID: d.ID, Type: d.Type, Data: d.Data, Metadata: d.Metadata}
}

// TestDecodersAgreeOnEncodedEvents: 5,000 random events of every type, with tricky strings, nil and
// empty slices and nanosecond times, encoded by Encode, decode to the same event with both decoders.
func TestDecodersAgreeOnEncodedEvents(t *testing.T) {
	r := rand.New(rand.NewPCG(2026, 11))
	for i := range 5000 {
		rec := recorded(t, randomEvent(r))
		want, err := decode(rec, json.Unmarshal)
		require.NoError(t, err, "event %d", i)
		got, err := JSON{}.Decode(rec)
		require.NoError(t, err, "event %d", i)
		require.Equal(t, want, got, "event %d: type %q\nmetadata %s\ndata %s", i, rec.Type, rec.Metadata, rec.Data)
	}
}

// FuzzDecodeAgreesWithEncodingJSON mutates stored documents: whatever encoding/json decodes,
// goccy/go-json must decode to the same event (fields in another order, unknown fields, other
// spacing, escapes encoding/json would not write, numbers in other forms).
func FuzzDecodeAgreesWithEncodingJSON(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 7))
	for range 40 {
		rec := recorded(f, randomEvent(r))
		f.Add(rec.Type, rec.Metadata, rec.Data)
	}
	f.Add(string(booking.TypeScheduled),
		[]byte(` { "occurred_at" : "2026-11-30T10:00:00.5+01:00", "booking":"b\u00e9", "extra": {"x":[1,2,{}]}, "provider":"calendly" } `),
		[]byte(`{"slot":{"start":"2026-12-01T10:00:00Z","end":"2026-12-01T10:30:00Z","resources":null,"meeting":"\ud83d\ude42"},"capacity":1e0,"payment_refs":[]}`))
	f.Fuzz(func(t *testing.T, typ string, metadata, data []byte) {
		agree(t, eventlog.RecordedEvent{StreamID: "booking-x", Version: 1, Type: typ, Metadata: metadata, Data: data})
	})
}
