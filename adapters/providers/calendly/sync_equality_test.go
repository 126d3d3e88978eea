package calendly_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providers/calendly/calendlyapi"
	"bookingledger/adapters/providers/providertest"
	"bookingledger/domain/booking"
)

// deliver makes the fake hold what a webhook body says, as Calendly's API would answer after it.
func deliver(t *testing.T, h *harness, body []byte) {
	t.Helper()
	resp, err := http.Post(h.fake.URL()+"/_fake/deliveries", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
}

func mapWebhook(t *testing.T, body []byte) []booking.Event {
	t.Helper()
	m, err := calendly.New(providers.NewSecrets("k"), 0).Map(context.Background(), nil, body, time.Now())
	require.NoError(t, err)
	require.NotEmpty(t, m.Events)
	return m.Events
}

// syncedEvents syncs May and June 2024 (the testdata's meetings) and returns the events of the
// invitees read, by booking.
func syncedEvents(t *testing.T, h *harness) map[booking.ID][]booking.Event {
	t.Helper()
	out := map[booking.ID][]booking.Event{}
	for _, it := range allItems(h.sync(t, time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 7, 1, 0, 0, 0, 0, time.UTC))) {
		require.NoError(t, it.Err, it.Ref)
		require.NotEmpty(t, it.Mapped.Events)
		out[it.Mapped.Events[0].Booking] = append(out[it.Mapped.Events[0].Booking], it.Mapped.Events...)
	}
	return out
}

// sameFact asserts that the sync's event for a fact is the webhook's: ID, type, booking, payload.
func sameFact(t *testing.T, webhook booking.Event, synced []booking.Event) booking.Event {
	t.Helper()
	for _, e := range synced {
		if e.ID == webhook.ID {
			assert.Equal(t, webhook.Type(), e.Type())
			assert.Equal(t, webhook.Booking, e.Booking)
			assert.Equal(t, webhook.ProviderRef, e.ProviderRef)
			assert.Equal(t, webhook.Payload, e.Payload)
			return e
		}
	}
	t.Errorf("sync has no event %s (%s); it has %+v", webhook.ID, webhook.ProviderRef, synced)
	return booking.Event{}
}

func TestSyncMapsAsTheWebhooks(t *testing.T) {
	tests := []struct {
		name string
		// delivered are the webhook bodies the fake is told about, in order; want are the webhooks
		// whose events the sync must produce with their provider times, nearly are those whose time
		// the sync can only approximate (the webhook's envelope time is not in the API).
		delivered []string
		want      []string
		nearly    []string
		// implied counts the sync's events no testdata webhook holds: the create a canceled invitee
		// stands for, whose webhook is not in testdata.
		implied int
	}{
		{name: "created", delivered: []string{"invitee_created.json"}, want: []string{"invitee_created.json"}},
		{name: "group created", delivered: []string{"invitee_created_group.json"}, want: []string{"invitee_created_group.json"}},
		{name: "canceled", delivered: []string{"invitee_canceled.json"}, want: []string{"invitee_canceled.json"}, implied: 1},
		{
			name:      "reschedule pair",
			delivered: []string{"invitee_canceled_rescheduled.json", "invitee_created_rescheduled.json"},
			want:      []string{"invitee_created.json", "invitee_canceled_rescheduled.json", "invitee_created_rescheduled.json"},
		},
		{
			name:      "no-show",
			delivered: []string{"invitee_no_show_created.json"},
			want:      []string{"invitee_created_group.json"},
			nearly:    []string{"invitee_no_show_created.json"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, calendlyapi.Config{})
			for _, f := range tt.delivered {
				deliver(t, h, providertest.ReadFile(t, f))
			}
			synced := syncedEvents(t, h)
			var webhookSet []booking.Event
			for _, f := range tt.want {
				for _, w := range mapWebhook(t, providertest.ReadFile(t, f)) {
					webhookSet = append(webhookSet, w)
					got := sameFact(t, w, synced[w.Booking])
					assert.Equal(t, w.OccurredAt, got.OccurredAt, "%s: the provider's time of the fact", f)
				}
			}
			for _, f := range tt.nearly {
				for _, w := range mapWebhook(t, providertest.ReadFile(t, f)) {
					webhookSet = append(webhookSet, w)
					got := sameFact(t, w, synced[w.Booking])
					assert.WithinDuration(t, w.OccurredAt, got.OccurredAt, time.Second, f)
				}
			}
			total := 0
			for id, events := range synced {
				total += len(events)
				if len(tt.nearly) == 0 && tt.implied == 0 {
					// Whichever path brought them, the bookings fold to the same state.
					assert.Equal(t, booking.Fold(only(webhookSet, id)), booking.Fold(events), id)
				}
			}
			assert.Equal(t, len(webhookSet)+tt.implied, total, "the sync brings no event the webhooks do not")
		})
	}
}

func only(events []booking.Event, id booking.ID) []booking.Event {
	var out []booking.Event
	for _, e := range events {
		if e.Booking == id {
			out = append(out, e)
		}
	}
	return out
}

// A reschedule found by the sync alone links the two bookings as the webhook pair does, and the old
// booking's cancel folds after its create.
func TestSyncLinksARescheduleFoundByItselfAlone(t *testing.T) {
	h := newHarness(t, calendlyapi.Config{})
	start := day.Add(9 * time.Hour)
	booked := h.fake.Schedule(calendlyapi.Booking{Start: start, End: start.Add(30 * time.Minute), Name: "Ada", Email: "ada@example.com",
		CreatedAt: day.Add(-72 * time.Hour)})
	old, moved, err := h.fake.Reschedule(booked.URI, start.Add(24*time.Hour), start.Add(24*time.Hour+30*time.Minute), day.Add(-24*time.Hour))
	require.NoError(t, err)

	items := allItems(h.sync(t, day, day.Add(72*time.Hour)))
	require.Contains(t, items, old.URI)
	require.Contains(t, items, moved.URI)
	oldEvents, newEvents := items[old.URI].Mapped.Events, items[moved.URI].Mapped.Events
	require.Len(t, oldEvents, 2)
	require.Len(t, newEvents, 1)

	oldState, newState := booking.Fold(oldEvents), booking.Fold(newEvents)
	assert.Equal(t, booking.StatusCanceled, oldState.Status)
	assert.Equal(t, newEvents[0].Booking, oldState.RescheduledTo)
	assert.Equal(t, oldEvents[0].Booking, newState.RescheduledFrom)
	assert.Equal(t, booking.StatusActive, newState.Status)
	assert.Equal(t, start.Add(24*time.Hour), newState.Slot.Start)
	assert.True(t, oldEvents[1].OccurredAt.After(oldEvents[0].OccurredAt), "the cancel folds after the create")
	assert.Empty(t, oldState.Findings, "nothing out of order")
}

// The dev path: what `bookingledger send calendly` posts, recorded by the fake, syncs to the events
// the same webhook maps to.
func TestSyncOfTheSampleWebhooksMapsAsTheWebhooks(t *testing.T) {
	h := newHarness(t, calendlyapi.Config{})
	p := sample.Params{Booking: "SAMPLEINVITEE001", Start: day.Add(9 * time.Hour), End: day.Add(9*time.Hour + 30*time.Minute)}
	var webhooks []booking.Event
	for _, event := range []string{calendly.EventInviteeCreated, calendly.EventInviteeCanceled} {
		body, err := sample.Body(calendly.Name, event, p)
		require.NoError(t, err)
		deliver(t, h, body)
		webhooks = append(webhooks, mapWebhook(t, body)...)
	}
	items := allItems(h.sync(t, day, day.Add(24*time.Hour)))
	require.Len(t, items, 1)
	for _, it := range items {
		require.NoError(t, it.Err)
		assert.Equal(t, webhooks, it.Mapped.Events)
		require.Len(t, it.Mapped.Contacts, 1)
	}
}

// An invitee that cannot be mapped is an item with an error wrapping ErrUnmappable; the sync goes
// on and the other invitees are mapped.
func TestUnmappableInviteeIsAnItemNotAFailedSync(t *testing.T) {
	h := newHarness(t, calendlyapi.Config{})
	good := seedOneToOne(h, 1)[0]
	body := bytes.Replace(providertest.ReadFile(t, "invitee_canceled.json"), []byte(`"event_memberships":[{`), []byte(`"event_memberships":[],"x":[{`), 1)
	require.Contains(t, string(body), `"event_memberships":[]`)
	deliver(t, h, body)
	deliver(t, h, bytes.ReplaceAll(providertest.ReadFile(t, "invitee_created.json"),
		[]byte(`"created_at": "2024-05-14T09:12:30.871243Z"`), []byte(`"created_at": "yesterday"`)))

	items := allItems(h.sync(t, time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC), day.Add(24*time.Hour)))
	require.Len(t, items, 3)
	assert.NoError(t, items[good.URI].Err)
	for _, ref := range []string{charles, adaFirst} {
		assert.ErrorIs(t, items[ref].Err, providers.ErrUnmappable, ref)
		assert.Empty(t, items[ref].Mapped.Events, ref)
		assert.NotEmpty(t, items[ref].Body, ref)
	}
}
