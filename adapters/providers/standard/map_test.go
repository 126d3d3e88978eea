package standard_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/providertest"
	"bookingledger/adapters/providers/standard"
	"bookingledger/domain/booking"
)

const (
	room    = "rooms.example.com/rooms/42"
	staff   = "rooms.example.com/staff/7"
	session = "rooms.example.com/sessions/numerics-2024-06-12"
)

func ts(tb testing.TB, s string) time.Time {
	tb.Helper()
	t, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(tb, err)
	return t.UTC()
}

func idHeader(id string) http.Header {
	h := http.Header{}
	h.Set(standard.HeaderID, id)
	return h
}

func mapBody(tb testing.TB, id string, body []byte) (providers.Mapped, error) {
	tb.Helper()
	p, err := standard.New(providers.NewSecrets("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), 0)
	require.NoError(tb, err)
	return p.Map(context.Background(), idHeader(id), body, time.Now())
}

// deliveryIDs maps each testdata payload to its webhook-id in signatures.json.
func deliveryIDs(tb testing.TB) map[string]string {
	tb.Helper()
	out := map[string]string{}
	for _, d := range readGolden(tb).Deliveries {
		out[d.BodyFile] = d.ID
	}
	return out
}

func TestMapTestdata(t *testing.T) {
	ids := deliveryIDs(t)
	one := func(file string, id booking.ID, at string, p booking.Payload) providers.Mapped {
		msg := ids[file]
		return providers.Mapped{DeliveryID: msg, Events: []booking.Event{{
			ID: providers.EventID("standard", msg), Booking: id, Provider: "standard",
			ProviderRef: msg, OccurredAt: ts(t, at), Payload: p,
		}}}
	}
	tests := []struct {
		file string
		want providers.Mapped
	}{
		{"booking_scheduled.json", one("booking_scheduled.json", "standard-rb-20240612-0042", "2024-06-10T13:00:08.250Z", booking.Scheduled{
			Slot:     booking.Slot{Meeting: session, Resources: []string{room, staff}, Start: ts(t, "2024-06-12T15:30:00Z"), End: ts(t, "2024-06-12T17:30:00Z")},
			Capacity: 12, PaymentRefs: []string{"stripe:pi_3PJbC4LkdIwHu7ix1nM2bV3c"},
		})},
		{"booking_requested.json", one("booking_requested.json", "standard-rb-20240605-0007", "2024-06-01T07:15:00Z", booking.Requested{
			Slot:     booking.Slot{Meeting: "standard-rb-20240605-0007", Resources: []string{room}, Start: ts(t, "2024-06-05T08:00:00Z"), End: ts(t, "2024-06-05T09:00:00Z")},
			Capacity: 1,
		})},
		{"booking_rejected.json", one("booking_rejected.json", "standard-rb-20240605-0007", "2024-06-01T11:02:41Z",
			booking.Rejected{Reason: "Room closed for maintenance"})},
		{"booking_rescheduled.json", one("booking_rescheduled.json", "standard-rb-20240612-0042", "2024-06-11T07:45:19.5Z", booking.Rescheduled{
			Slot: booking.Slot{Meeting: session, Resources: []string{room, staff}, Start: ts(t, "2024-06-12T16:00:00Z"), End: ts(t, "2024-06-12T18:00:00Z")},
		})},
		{"booking_canceled.json", one("booking_canceled.json", "standard-rb-20240612-0042", "2024-06-12T08:30:00Z",
			booking.Canceled{Reason: "Instructor unwell", CanceledBy: "provider"})},
		{"booking_canceled_replaced.json", one("booking_canceled_replaced.json", "standard-rb-20240620-0101", "2024-06-14T10:00:00Z",
			booking.Canceled{Reason: "Moved to a larger room", CanceledBy: "host", RescheduledTo: "standard-rb-20240620-0102"})},
		{"booking_scheduled_replacement.json", one("booking_scheduled_replacement.json", "standard-rb-20240620-0102", "2024-06-14T10:00:00Z", booking.Scheduled{
			Slot:     booking.Slot{Meeting: "standard-rb-20240620-0102", Resources: []string{"rooms.example.com/rooms/51"}, Start: ts(t, "2024-06-20T09:00:00Z"), End: ts(t, "2024-06-20T10:00:00Z")},
			Capacity: 1, RescheduledFrom: "standard-rb-20240620-0101",
		})},
		{"booking_no_show_marked.json", one("booking_no_show_marked.json", "standard-rb-20240612-0042", "2024-06-12T16:20:00Z", booking.NoShowMarked{})},
		{"booking_no_show_cleared.json", one("booking_no_show_cleared.json", "standard-rb-20240612-0042", "2024-06-12T16:35:00Z", booking.NoShowCleared{})},
		{"invoice_paid.json", providers.Mapped{DeliveryID: ids["invoice_paid.json"], Reason: "standard webhook type invoice.paid not mapped"}},
	}
	require.Len(t, tests, len(ids), "every testdata payload has an expectation")
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			require.NotEmpty(t, ids[tt.file])
			got, err := mapBody(t, ids[tt.file], providertest.ReadFile(t, tt.file))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			providertest.CheckMapped(t, standard.Name, got, err)
		})
	}
}

func TestRetryIsDuplicateAndMessagesAreDistinct(t *testing.T) {
	g := readGolden(t)
	p := newProvider(t, 0, g.Secrets...)
	d := g.Deliveries[len(g.Deliveries)-3] // booking_scheduled.json
	require.Equal(t, "booking_scheduled.json", d.BodyFile)
	body := providertest.ReadFile(t, d.BodyFile)

	first, err := p.Map(context.Background(), headers(d.ID, strconv.FormatInt(d.Timestamp, 10), d.Signature), body, time.Now())
	require.NoError(t, err)
	// A retry: same webhook-id and body, a fresh attempt timestamp and signature.
	later := time.Unix(d.Timestamp, 0).Add(5 * time.Hour)
	h, err := standard.Headers(g.Secrets[0], d.ID, later, body)
	require.NoError(t, err)
	_, err = p.Verify(h, body, later)
	require.NoError(t, err)
	retry, err := p.Map(context.Background(), h, body, later)
	require.NoError(t, err)
	assert.Equal(t, first, retry, "same webhook-id: same event, same provider time")

	// The same body under another webhook-id is another message.
	other, err := p.Map(context.Background(), idHeader(d.ID+"-2"), body, time.Now())
	require.NoError(t, err)
	assert.NotEqual(t, providertest.IDs(first), providertest.IDs(other))

	seen := map[string]bool{}
	for _, d := range g.Deliveries {
		m, err := mapBody(t, d.ID, providertest.ReadFile(t, d.BodyFile))
		require.NoError(t, err)
		for _, id := range providertest.IDs(m) {
			assert.False(t, seen[id], "duplicate event id across messages")
			seen[id] = true
		}
	}
	assert.Len(t, seen, 9)
}

func TestReplacementLinksBothWays(t *testing.T) {
	ids := deliveryIDs(t)
	canceled, err := mapBody(t, ids["booking_canceled_replaced.json"], providertest.ReadFile(t, "booking_canceled_replaced.json"))
	require.NoError(t, err)
	replacement, err := mapBody(t, ids["booking_scheduled_replacement.json"], providertest.ReadFile(t, "booking_scheduled_replacement.json"))
	require.NoError(t, err)
	old, repl := canceled.Events[0], replacement.Events[0]
	assert.Equal(t, repl.Booking, old.Payload.(booking.Canceled).RescheduledTo)
	assert.Equal(t, old.Booking, repl.Payload.(booking.Scheduled).RescheduledFrom)
}

func TestLifecycleFoldsTheSameInAnyOrder(t *testing.T) {
	ids := deliveryIDs(t)
	var events []booking.Event
	for _, f := range []string{"booking_scheduled.json", "booking_rescheduled.json", "booking_canceled.json", "booking_no_show_marked.json", "booking_no_show_cleared.json"} {
		m, err := mapBody(t, ids[f], providertest.ReadFile(t, f))
		require.NoError(t, err)
		events = append(events, m.Events...)
	}
	want := booking.Fold(events)
	assert.Equal(t, booking.StatusCanceled, want.Status)
	assert.Equal(t, ts(t, "2024-06-12T16:00:00Z"), want.Slot.Start, "the reschedule moved the slot before the cancel")
	reversed := make([]booking.Event, 0, len(events))
	for i := len(events) - 1; i >= 0; i-- {
		reversed = append(reversed, events[i])
	}
	assert.Equal(t, want, booking.Fold(reversed))
}

func TestMapErrors(t *testing.T) {
	scheduled := string(providertest.ReadFile(t, "booking_scheduled.json"))
	canceled := string(providertest.ReadFile(t, "booking_canceled_replaced.json"))
	replacement := string(providertest.ReadFile(t, "booking_scheduled_replacement.json"))
	tests := []struct{ name, id, body string }{
		{"no webhook-id", "", scheduled},
		{"not json", "msg_1", "type=booking.scheduled"},
		{"trailing garbage", "msg_1", scheduled + "{}"},
		{"no type", "msg_1", strings.Replace(scheduled, `"type": "booking.scheduled"`, `"type": ""`, 1)},
		{"no timestamp", "msg_1", strings.Replace(scheduled, `"timestamp": "2024-06-10T13:00:08.250Z"`, `"timestamp": ""`, 1)},
		{"timestamp without zone", "msg_1", strings.Replace(scheduled, `"timestamp": "2024-06-10T13:00:08.250Z"`, `"timestamp": "2024-06-10T13:00:08"`, 1)},
		{"no booking", "msg_1", strings.Replace(scheduled, `"booking": "rb-20240612-0042"`, `"booking": ""`, 1)},
		{"booking with a space", "msg_1", strings.Replace(scheduled, `"booking": "rb-20240612-0042"`, `"booking": "rb 42"`, 1)},
		{"no resources", "msg_1", strings.Replace(scheduled, `"resources": [`, `"resources": [], "x": [`, 1)},
		{"empty resource", "msg_1", strings.Replace(scheduled, `"resources": [`, `"resources": ["",`, 1)},
		{"bad start", "msg_1", strings.Replace(scheduled, `"start": "2024-06-12T15:30:00Z"`, `"start": "soon"`, 1)},
		{"end before start", "msg_1", strings.Replace(scheduled, `"end": "2024-06-12T17:30:00Z"`, `"end": "2024-06-12T14:30:00Z"`, 1)},
		{"capacity not a number", "msg_1", strings.Replace(scheduled, `"capacity": 12`, `"capacity": "12"`, 1)},
		// Times and capacities an event cannot be stored or projected with: year 10000 in UTC, a
		// capacity beyond the read model's 32-bit integer.
		{"timestamp the zero time", "msg_1", strings.Replace(scheduled, `"timestamp": "2024-06-10T13:00:08.250Z"`, `"timestamp": "0001-01-01T00:00:00Z"`, 1)},
		{"capacity beyond the maximum", "msg_1", strings.Replace(scheduled, `"capacity": 12`, `"capacity": 3000000000`, 1)},
		{"end in the year 10000 UTC", "msg_1", strings.Replace(scheduled, `"end": "2024-06-12T17:30:00Z"`, `"end": "9999-12-31T23:59:59-23:59"`, 1)},
		{"timestamp before the year 0000 UTC", "msg_1", strings.Replace(scheduled, `"timestamp": "2024-06-10T13:00:08.250Z"`, `"timestamp": "0000-01-01T00:59:59+01:00"`, 1)},
		{"unknown canceled_by", "msg_1", strings.Replace(canceled, `"canceled_by": "host"`, `"canceled_by": "admin"`, 1)},
		{"rescheduled_to itself", "msg_1", strings.Replace(canceled, `"rescheduled_to": "rb-20240620-0102"`, `"rescheduled_to": "rb-20240620-0101"`, 1)},
		{"rescheduled_from itself", "msg_1", strings.Replace(replacement, `"rescheduled_from": "rb-20240620-0101"`, `"rescheduled_from": "rb-20240620-0102"`, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.id != "" {
				for _, o := range []string{scheduled, canceled, replacement} {
					require.NotEqual(t, o, tt.body, "the case must change the body")
				}
			}
			_, err := mapBody(t, tt.id, []byte(tt.body))
			require.Error(t, err)
			assert.ErrorIs(t, err, providers.ErrUnmappable)
		})
	}
}

func TestMapRules(t *testing.T) {
	scheduled := string(providertest.ReadFile(t, "booking_scheduled.json"))

	t.Run("a resource named twice is one resource", func(t *testing.T) {
		body := strings.Replace(scheduled, `"resources": [`, `"resources": ["`+room+`", `, 1)
		require.NotEqual(t, scheduled, body)
		got, err := mapBody(t, "msg_1", []byte(body))
		require.NoError(t, err)
		require.Len(t, got.Events, 1)
		assert.Equal(t, []string{room, staff}, got.Events[0].Payload.(booking.Scheduled).Slot.Resources)
	})
	t.Run("a payment ref with white space is quarantined", func(t *testing.T) {
		body := strings.Replace(scheduled, `"stripe:pi_3PJbC4LkdIwHu7ix1nM2bV3c"`, `"stripe:pi_3PJbC4 LkdIwHu7ix1nM2bV3c"`, 1)
		require.NotEqual(t, scheduled, body)
		_, err := mapBody(t, "msg_1", []byte(body))
		assert.ErrorIs(t, err, providers.ErrUnmappable)
	})
}
