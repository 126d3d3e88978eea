package calendly_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providers/calendly/calendlyapi"
)

const callback = "https://ledger.example.com/webhooks/calendly"

func connect(t *testing.T, h *harness, secret string) providers.ConnectResult {
	t.Helper()
	res, err := h.api.Connect(context.Background(), callback, secret)
	require.NoError(t, err)
	return res
}

// heldFor returns the one subscription the fake holds for callback.
func heldFor(t *testing.T, h *harness) calendlyapi.Subscription {
	t.Helper()
	var held []calendlyapi.Subscription
	for _, s := range h.fake.Subscriptions() {
		if s.CallbackURL == callback {
			held = append(held, s)
		}
	}
	require.Len(t, held, 1)
	return held[0]
}

func TestConnectCreatesOnceAndThenChangesNothing(t *testing.T) {
	for _, member := range []bool{false, true} {
		scope := map[bool]string{false: "organization", true: "user"}[member]
		t.Run(scope, func(t *testing.T) {
			h := newHarness(t, calendlyapi.Config{Member: member})
			res := connect(t, h, "first-secret")
			assert.Equal(t, providers.ConnectCreated, res.Action)
			assert.Equal(t, "first-secret", res.Secret)
			assert.Equal(t, providers.SubscriptionActive, res.Subscription.State)
			assert.ElementsMatch(t, calendly.WebhookEvents(), res.Subscription.Events)
			held := heldFor(t, h)
			assert.Equal(t, "first-secret", held.SigningKey)
			assert.Equal(t, scope, held.Scope)
			assert.Equal(t, held.URI, res.Subscription.ID)

			again := connect(t, h, "second-secret")
			assert.Equal(t, providers.ConnectUnchanged, again.Action)
			assert.Empty(t, again.Secret, "the subscription keeps its signing key")
			assert.Equal(t, held, heldFor(t, h))
		})
	}
}

func TestConnectRecreatesADisabledSubscriptionOnce(t *testing.T) {
	h := newHarness(t, calendlyapi.Config{})
	created := connect(t, h, "first-secret")
	require.NoError(t, h.fake.DisableSubscription(created.Subscription.ID))

	listed, err := h.api.List(context.Background())
	require.NoError(t, err)
	require.Len(t, listed, 1)
	assert.Equal(t, providers.SubscriptionDisabled, listed[0].State)
	assert.Equal(t, callback, listed[0].URL)
	assert.Contains(t, listed[0].Detail, "retrying since 2026-11-30T08:00:00")

	res := connect(t, h, "second-secret")
	assert.Equal(t, providers.ConnectRecreated, res.Action)
	assert.Equal(t, "second-secret", res.Secret)
	held := heldFor(t, h)
	assert.NotEqual(t, created.Subscription.ID, held.URI, "Calendly cannot re-enable: a new subscription")
	assert.Equal(t, "active", held.State)
	assert.Equal(t, "second-secret", held.SigningKey)

	again := connect(t, h, "third-secret")
	assert.Equal(t, providers.ConnectUnchanged, again.Action)
	assert.Equal(t, held, heldFor(t, h))

	listed, err = h.api.List(context.Background())
	require.NoError(t, err)
	require.Len(t, listed, 1)
	assert.Equal(t, providers.SubscriptionActive, listed[0].State)
	assert.Equal(t, "scope organization", listed[0].Detail)
}

// Calendly has no update endpoint: a subscription missing some of the events is replaced.
func TestConnectReplacesASubscriptionMissingEvents(t *testing.T) {
	h := newHarness(t, calendlyapi.Config{})
	_, org := h.fake.Me()
	body, err := json.Marshal(map[string]any{"url": callback, "events": []string{"invitee.created"}, "organization": org, "scope": "organization"})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, h.fake.URL()+"/webhook_subscriptions", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+fakeToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	res := connect(t, h, "new-secret")
	assert.Equal(t, providers.ConnectRecreated, res.Action)
	assert.ElementsMatch(t, calendly.WebhookEvents(), heldFor(t, h).Events)
	assert.Equal(t, providers.ConnectUnchanged, connect(t, h, "other").Action)
}

func TestListReadsEveryPage(t *testing.T) {
	h := newHarness(t, calendlyapi.Config{})
	for i := range 103 {
		_, err := h.api.Connect(context.Background(), callback+"/"+string(rune('a'+i%26))+string(rune('a'+i/26)), "s")
		require.NoError(t, err)
	}
	before := h.fake.Requests()
	listed, err := h.api.List(context.Background())
	require.NoError(t, err)
	assert.Len(t, listed, 103)
	assert.Equal(t, 2, h.fake.Requests()-before, "two pages of at most 100")
}
