package calcom_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calcom"
	"bookingledger/adapters/providers/calcom/calcomapi"
	"bookingledger/domain/booking"
)

// The sync maps an API booking through the webhook's mapping. Each fact gives the same booking, type,
// payload and provider time whichever path brings it, and identities that differ only in the stamp:
// the webhook's envelope createdAt (the time Cal.com sent it, which the API never shows) is "api" on
// the sync's path. The sample bodies are what `bookingledger send calcom` posts; the fake records
// what they describe, so the API answers for the same facts.
func TestAPIBookingsMapAsTheirWebhooks(t *testing.T) {
	start := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		triggers []string
		uids     []string // the bookings the sync reads
	}{
		{"created", []string{calcom.TriggerBookingCreated}, []string{"bk1"}},
		{"cancelled", []string{calcom.TriggerBookingCreated, calcom.TriggerBookingCancelled}, []string{"bk1"}},
		{"rescheduled", []string{calcom.TriggerBookingCreated, calcom.TriggerBookingRescheduled}, []string{"bk1", sample.CalcomRescheduledUID("bk1")}},
		{"requested", []string{calcom.TriggerBookingRequested}, []string{"bk1"}},
		{"rejected", []string{calcom.TriggerBookingRequested, calcom.TriggerBookingRejected}, []string{"bk1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, 10)
			var fromWebhooks providers.Mapped
			for _, trigger := range tt.triggers {
				body, err := sample.Body(calcom.Name, trigger, sample.Params{Booking: "bk1", Start: start})
				require.NoError(t, err)
				require.NoError(t, f.fake.Record(body))
				m, err := mapBody(t, body)
				require.NoError(t, err)
				fromWebhooks.Events = append(fromWebhooks.Events, m.Events...)
				fromWebhooks.Contacts = append(fromWebhooks.Contacts, m.Contacts...)
			}
			pages := f.sync(t, providers.SyncWindow{From: start.AddDate(0, 0, -10), To: start.AddDate(0, 0, 10)})
			require.Equal(t, prefixed("booking ", tt.uids), refs(pages))
			var fromAPI providers.Mapped
			for _, it := range pages[0].Items {
				require.NoError(t, it.Err, it.Ref)
				fromAPI.Events = append(fromAPI.Events, it.Mapped.Events...)
				fromAPI.Contacts = append(fromAPI.Contacts, it.Mapped.Contacts...)
			}
			if tt.name == "rejected" {
				// The API's booking has no rejectionReason: the only difference between the paths.
				for i, e := range fromWebhooks.Events {
					if r, ok := e.Payload.(booking.Rejected); ok {
						require.NotEmpty(t, r.Reason)
						fromWebhooks.Events[i].Payload = booking.Rejected{}
					}
				}
			}

			require.Len(t, fromAPI.Events, len(fromWebhooks.Events))
			for i, want := range fromWebhooks.Events {
				got := fromAPI.Events[i]
				assert.Equal(t, want.Booking, got.Booking, "event %d", i)
				assert.Equal(t, want.Type(), got.Type(), "event %d", i)
				assert.Equal(t, want.Payload, got.Payload, "event %d", i)
				assert.Equal(t, want.OccurredAt, got.OccurredAt, "event %d: Cal.com's time of the fact", i)
				assert.Equal(t, apiIdentity(t, want.ProviderRef), got.ProviderRef, "event %d", i)
				assert.Equal(t, providers.EventID(calcom.Name, got.ProviderRef), got.ID, "event %d", i)
				assert.NotEqual(t, want.ID, got.ID, "event %d: the webhook's ID needs its envelope's createdAt", i)
				// So the fact is what makes them one: each names it, and each, stored, is the other's fact.
				assert.NotEmpty(t, got.Fact, "event %d", i)
				assert.Equal(t, want.Fact, got.Fact, "event %d", i)
				assert.True(t, got.SameFact(want), "event %d: the API's copy finds the webhook's stored event", i)
				assert.True(t, want.SameFact(got), "event %d: a late webhook finds the sync's stored event", i)
			}
			assert.Equal(t, dedupe(fromWebhooks.Contacts), dedupe(fromAPI.Contacts))

			again := f.sync(t, providers.SyncWindow{From: start.AddDate(0, 0, -10), To: start.AddDate(0, 0, 10)})
			assert.Equal(t, events(pages), events(again), "a second read derives the same IDs: duplicates")
		})
	}
}

// apiIdentity is the sync's identity of the fact a webhook identity "<trigger> <uid> <createdAt>[ …]"
// names: the envelope's createdAt replaced by "api".
func apiIdentity(t *testing.T, webhook string) string {
	t.Helper()
	parts := strings.Split(webhook, " ")
	require.GreaterOrEqual(t, len(parts), 3, webhook)
	_, err := time.Parse(time.RFC3339Nano, parts[2])
	require.NoError(t, err, webhook)
	parts[2] = "api"
	return strings.Join(parts, " ")
}

func prefixed(prefix string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = prefix + s
	}
	return out
}

func dedupe(cs []providers.Contact) []providers.Contact {
	var out []providers.Contact
	for _, c := range cs {
		if !containsContact(out, c) {
			out = append(out, c)
		}
	}
	return out
}

func containsContact(cs []providers.Contact, c providers.Contact) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

// A booking moved out of the window is read by its uid after the last page: its
// BOOKING_RESCHEDULED is what cancels the old booking.
func TestSyncFollowsARescheduleOutOfTheWindow(t *testing.T) {
	f := newFixture(t, 10)
	f.add(t, "old", day.Add(9*time.Hour))
	f.clock.Advance(time.Hour)
	moved, err := f.fake.Reschedule("old", "new", day.AddDate(0, 1, 0), day.AddDate(0, 1, 0).Add(30*time.Minute))
	require.NoError(t, err)

	pages := f.sync(t, window())
	require.Len(t, pages, 2, "the window's page, then the successor")
	assert.Equal(t, []string{"booking old", "booking new"}, refs(pages))
	assert.Equal(t, 2, f.fake.Requests())
	evs := events(pages)
	require.Len(t, evs, 3)
	assert.Equal(t, booking.ID("calcom-old"), evs[2].Booking)
	assert.Equal(t, booking.Canceled{Reason: "rescheduled", CanceledBy: "provider", RescheduledTo: "calcom-new", Implied: true}, evs[2].Payload)
	assert.Equal(t, moved.CreatedAt, evs[2].OccurredAt)
}

// An object the mapping refuses is an item with its reason, never a failed sync.
func TestUnmappableBookingIsAnItemNotAFailure(t *testing.T) {
	f := newFixture(t, 10)
	_, err := f.fake.Add(calcomapi.Booking{UID: "orphan", Start: day.Add(9 * time.Hour), End: day.Add(10 * time.Hour)}) // its host user is gone
	require.NoError(t, err)
	f.add(t, "fine", day.Add(11*time.Hour))

	pages := f.sync(t, window())
	require.Equal(t, []string{"booking orphan", "booking fine"}, refs(pages))
	orphan := pages[0].Items[0]
	require.Error(t, orphan.Err)
	assert.True(t, errors.Is(orphan.Err, providers.ErrUnmappable), "%v", orphan.Err)
	assert.Contains(t, orphan.Err.Error(), "organizer")
	assert.Empty(t, orphan.Mapped.Events)
	assert.NotEmpty(t, orphan.Body, "kept for the quarantined receipt")
	assert.NoError(t, pages[0].Items[1].Err)
}

func TestConnectCreatesOnceAndReenablesInPlace(t *testing.T) {
	f := newFixture(t, 10)
	ctx := context.Background()
	const target = "https://ledger.example.com/webhooks/calcom"
	other, err := f.client(testKey, 10).Connect(ctx, "https://elsewhere.example.com/hook", "other-secret")
	require.NoError(t, err)
	require.Equal(t, providers.ConnectCreated, other.Action)

	secret := providers.NewSigningSecret()
	created, err := f.api.Connect(ctx, target, secret)
	require.NoError(t, err)
	assert.Equal(t, providers.ConnectCreated, created.Action)
	assert.Equal(t, secret, created.Secret)
	assert.Equal(t, providers.SubscriptionActive, created.Subscription.State)
	assert.ElementsMatch(t, calcom.MappedTriggers(), created.Subscription.Events)
	hooks := f.fake.Webhooks()
	require.Len(t, hooks, 2)
	assert.Equal(t, secret, hooks[1].Secret, "Cal.com signs with the secret we chose")

	steps := []struct {
		name   string
		before func()
		want   string
	}{
		{"second run", func() {}, providers.ConnectUnchanged},
		{"disabled", func() { require.NoError(t, f.fake.DisableWebhook(created.Subscription.ID)) }, providers.ConnectEnabled},
		{"after re-enabling", func() {}, providers.ConnectUnchanged},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.before()
			res, err := f.api.Connect(ctx, target, providers.NewSigningSecret())
			require.NoError(t, err)
			assert.Equal(t, s.want, res.Action)
			assert.Empty(t, res.Secret, "an existing webhook keeps its secret")
			assert.Equal(t, created.Subscription.ID, res.Subscription.ID)
			assert.Equal(t, providers.SubscriptionActive, res.Subscription.State)
			hooks := f.fake.Webhooks()
			require.Len(t, hooks, 2, "never a second webhook for the URL")
			assert.Equal(t, secret, hooks[1].Secret)
			assert.True(t, hooks[1].Active)
		})
	}

	t.Run("missing triggers are added", func(t *testing.T) {
		req, err := patchTriggers(f.fake.URL(), created.Subscription.ID, []string{calcom.TriggerBookingCreated})
		require.NoError(t, err)
		require.Equal(t, 200, req)
		res, err := f.api.Connect(ctx, target, "unused")
		require.NoError(t, err)
		assert.Equal(t, providers.ConnectUpdated, res.Action)
		assert.ElementsMatch(t, calcom.MappedTriggers(), f.fake.Webhooks()[1].Triggers)
	})

	t.Run("list shows a disabled webhook", func(t *testing.T) {
		require.NoError(t, f.fake.DisableWebhook(other.Subscription.ID))
		subs, err := f.api.List(ctx)
		require.NoError(t, err)
		require.Len(t, subs, 2)
		assert.Equal(t, providers.Subscription{
			ID: other.Subscription.ID, URL: "https://elsewhere.example.com/hook", Events: calcom.MappedTriggers(),
			State: providers.SubscriptionDisabled, Detail: "active: false",
		}, subs[0])
		assert.Equal(t, providers.SubscriptionActive, subs[1].State)
	})
}

// patchTriggers narrows a webhook's triggers through the API, as its owner could.
func patchTriggers(base, id string, triggers []string) (int, error) {
	body, err := json.Marshal(map[string]any{"triggers": triggers})
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequest(http.MethodPatch, base+"/webhooks/"+id, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}
