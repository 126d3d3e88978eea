package stripe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/providertest"
	"bookingledger/adapters/providers/stripe"
	"bookingledger/adapters/providers/stripe/stripeapi"
)

const testKey = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"

// queries records the query of every request a client sends.
type queries struct {
	mu  sync.Mutex
	got []url.Values
}

func (q *queries) RoundTrip(r *http.Request) (*http.Response, error) {
	q.mu.Lock()
	q.got = append(q.got, r.URL.Query())
	q.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

func (q *queries) All() []url.Values {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]url.Values(nil), q.got...)
}

type fixture struct {
	fake    *stripeapi.Server
	clock   *providertest.Clock
	queries *queries
	api     *stripe.API
}

func newFixture(t *testing.T, now time.Time, rate int) *fixture {
	t.Helper()
	c := providertest.NewClock(now)
	fake, err := stripeapi.Start(stripeapi.Config{Key: testKey, Now: c.Now, RatePerSecond: rate})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, fake.Close()) })
	q := &queries{}
	api := stripe.NewAPI(stripe.APIConfig{Key: testKey, URL: fake.URL(), Client: &http.Client{Transport: q}, Sleep: c.Sleep, Now: c.Now})
	return &fixture{fake: fake, clock: c, queries: q, api: api}
}

// sync runs a sync and returns its pages.
func (f *fixture) sync(t *testing.T, w providers.SyncWindow) ([]providers.SyncPage, error) {
	t.Helper()
	var pages []providers.SyncPage
	err := f.api.Sync(context.Background(), w, func(p providers.SyncPage) error {
		pages = append(pages, p)
		return nil
	})
	return pages, err
}

// paymentEvent is payment_intent.succeeded of payment n, created at created.
func paymentEvent(t *testing.T, n int, created int64) []byte {
	t.Helper()
	body := string(providertest.ReadFile(t, "payment_intent_succeeded.json"))
	body = strings.ReplaceAll(body, piCal, fmt.Sprintf("pi_sync%04d", n))
	body = strings.Replace(body, "evt_3PGxZ9LkdIwHu7ix1Q2w3E4r", fmt.Sprintf("evt_sync%04d", n), 1)
	body = strings.Replace(body, `"created": 1715678012`, `"created": `+strconv.FormatInt(created, 10), 1)
	require.Contains(t, body, fmt.Sprintf(`"created": %d`, created))
	return []byte(body)
}

// Every listed event maps exactly as its webhook: same delivery, event IDs, types, bookings,
// payloads; an event the mapper ignores is ignored alike, and one it cannot map is an item with an
// ErrUnmappable error, not a failed sync.
func TestSyncMapsEachEventAsItsWebhook(t *testing.T) {
	files := []string{
		"payment_intent_succeeded.json", "payment_intent_payment_failed.json", "charge_refunded.json",
		"charge_refunded_full.json", "checkout_session_completed.json", "checkout_session_completed_unpaid.json",
		"charge_dispute_created.json",
	}
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			body := providertest.ReadFile(t, file)
			var head struct{ Created int64 }
			require.NoError(t, json.Unmarshal(body, &head))
			webhook, err := mapBody(t, body)
			require.NoError(t, err)

			f := newFixture(t, time.Unix(head.Created, 0).Add(time.Hour), 0)
			require.NoError(t, f.fake.AddEvent(body))
			pages, err := f.sync(t, providers.SyncWindow{From: time.Unix(head.Created, 0).Add(-time.Minute)})
			require.NoError(t, err)
			require.Len(t, pages, 1)
			require.Len(t, pages[0].Items, 1)
			item := pages[0].Items[0]
			require.NoError(t, item.Err)
			assert.Equal(t, webhook.DeliveryID, item.Ref, "Ref is the event id")
			assert.Equal(t, webhook, item.Mapped)
			assert.JSONEq(t, string(body), string(item.Body), "Body is the event as listed")
		})
	}
	t.Run("unmappable", func(t *testing.T) {
		body := strings.Replace(string(providertest.ReadFile(t, "payment_intent_succeeded.json")),
			`"booking_id": "calcom-u8Jq2aXcK4vNw7Rz3TmB9p"`, `"booking_id": "not a booking"`, 1)
		require.Contains(t, body, `"not a booking"`)
		f := newFixture(t, time.Unix(1715678012, 0).Add(time.Hour), 0)
		require.NoError(t, f.fake.AddEvent([]byte(body)))
		pages, err := f.sync(t, providers.SyncWindow{})
		require.NoError(t, err, "an event that will not map is an item, not a failed sync")
		require.Len(t, pages, 1)
		require.Len(t, pages[0].Items, 1)
		assert.ErrorIs(t, pages[0].Items[0].Err, providers.ErrUnmappable)
		assert.Empty(t, pages[0].Items[0].Mapped.Events)
	})
}

// 250 events are three pages of 100 through starting_after; the query asks for the mapped types only
// and clamps the window to Stripe's 30 days; the cursor is the newest created, on the last page
// only; a second run of the same window costs the same three requests, and a run from the cursor one.
func TestSyncPagesAndResumesFromTheNewestCreated(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	f := newFixture(t, now, 0)
	base := now.Add(-10 * 24 * time.Hour).Unix()
	for i := range 250 {
		require.NoError(t, f.fake.AddEvent(paymentEvent(t, i, base+int64(i))))
	}
	require.NoError(t, f.fake.AddEvent(paymentEvent(t, 999, now.Add(-31*24*time.Hour).Unix())), "older than Stripe keeps")

	pages, err := f.sync(t, providers.SyncWindow{From: now.Add(-90 * 24 * time.Hour), Cursor: ""})
	require.NoError(t, err)
	require.Len(t, pages, 3)
	seen := map[string]bool{}
	for _, p := range pages {
		for _, it := range p.Items {
			require.NoError(t, it.Err)
			seen[it.Ref] = true
		}
	}
	assert.Len(t, seen, 250, "every event once")
	assert.Equal(t, []string{"", "", strconv.FormatInt(base+249, 10)}, []string{pages[0].Cursor, pages[1].Cursor, pages[2].Cursor})
	assert.Equal(t, 3, f.fake.Requests())

	qs := f.queries.All()
	require.Len(t, qs, 3)
	assert.Equal(t, strconv.FormatInt(now.Add(-stripe.EventRetention).Unix(), 10), qs[0].Get("created[gte]"), "clamped to 30 days")
	assert.Equal(t, stripe.Types(), qs[0]["types[]"])
	assert.LessOrEqual(t, len(qs[0]["types[]"]), 20, "Stripe takes at most 20 types")
	assert.Equal(t, "100", qs[0].Get("limit"))
	assert.Empty(t, qs[0].Get("starting_after"))
	assert.Equal(t, "evt_sync0150", qs[1].Get("starting_after"), "newest first: page 1 ends at the 150th")

	_, err = f.sync(t, providers.SyncWindow{From: now.Add(-90 * 24 * time.Hour)})
	require.NoError(t, err)
	assert.Equal(t, 6, f.fake.Requests(), "nothing changed: one request per page again")

	resumed, err := f.sync(t, providers.SyncWindow{Cursor: pages[2].Cursor})
	require.NoError(t, err)
	assert.Equal(t, 7, f.fake.Requests())
	require.Len(t, resumed, 1)
	require.Len(t, resumed[0].Items, 1, "gte re-reads the cursor's second only")
	assert.Equal(t, "evt_sync0249", resumed[0].Items[0].Ref)
	assert.Equal(t, pages[2].Cursor, resumed[0].Cursor)

	empty, err := f.sync(t, providers.SyncWindow{From: now.Add(-time.Hour), To: now})
	require.NoError(t, err)
	require.Len(t, empty, 1)
	assert.Empty(t, empty[0].Items)
	assert.Empty(t, empty[0].Cursor, "no event, no resume point beyond the window")
	assert.Equal(t, strconv.FormatInt(now.Unix(), 10), f.queries.All()[7].Get("created[lte]"))
}

// A 429 is waited out (the client's backoff: Stripe sends no Retry-After) and the page read again.
func TestSyncWaitsOutTheRateLimit(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	f := newFixture(t, now, 1)
	for i := range 150 {
		require.NoError(t, f.fake.AddEvent(paymentEvent(t, i, now.Add(-time.Hour).Unix()+int64(i))))
	}
	pages, err := f.sync(t, providers.SyncWindow{From: now.Add(-2 * time.Hour)})
	require.NoError(t, err)
	require.Len(t, pages, 2)
	assert.Len(t, pages[1].Items, 50)
	assert.Equal(t, []time.Duration{time.Second}, f.clock.Waits(), "the second page's first try was over the budget")
	assert.Equal(t, 3, f.fake.Requests())
}

func TestAPIErrorsCarryTheirSentinel(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	f := newFixture(t, now, 0)
	wrong := stripe.NewAPI(stripe.APIConfig{Key: "sk_test_wrong", URL: f.fake.URL(), Now: f.clock.Now, Sleep: f.clock.Sleep})
	_, err := (&fixture{api: wrong}).sync(t, providers.SyncWindow{})
	assert.ErrorIs(t, err, providers.ErrAPIAuth)
	_, err = wrong.List(context.Background())
	assert.ErrorIs(t, err, providers.ErrAPIAuth)
	assert.NotContains(t, err.Error(), "sk_test_wrong", "the key is never in an error")

	before := f.fake.Requests()
	_, err = f.sync(t, providers.SyncWindow{Cursor: "yesterday"})
	assert.Error(t, err, "a cursor that is not Unix seconds")
	assert.Equal(t, before, f.fake.Requests(), "refused before any request")

	stop := fmt.Errorf("stop")
	require.NoError(t, f.fake.AddEvent(paymentEvent(t, 1, now.Add(-time.Minute).Unix())))
	err = f.api.Sync(context.Background(), providers.SyncWindow{}, func(providers.SyncPage) error { return stop })
	assert.ErrorIs(t, err, stop, "the page callback's error stops the sync")
}

func TestConnectCreatesThenLeavesAloneThenReenables(t *testing.T) {
	const target = "https://ledger.example.com/webhooks/stripe"
	ctx := context.Background()
	f := newFixture(t, time.Unix(1_800_000_000, 0), 0)

	res, err := f.api.Connect(ctx, target, "unused")
	require.NoError(t, err)
	assert.Equal(t, providers.ConnectCreated, res.Action)
	assert.True(t, strings.HasPrefix(res.Secret, "whsec_"), "Stripe's own secret, returned once")
	eps := f.fake.Endpoints()
	require.Len(t, eps, 1)
	assert.Equal(t, stripeapi.Endpoint{ID: res.Subscription.ID, URL: target, Status: "enabled", Events: stripe.Types()}, eps[0])

	before := f.fake.Requests()
	again, err := f.api.Connect(ctx, target, "unused")
	require.NoError(t, err)
	assert.Equal(t, providers.ConnectUnchanged, again.Action)
	assert.Empty(t, again.Secret)
	assert.Equal(t, before+1, f.fake.Requests(), "the second run only lists")
	assert.Len(t, f.fake.Endpoints(), 1)

	require.NoError(t, f.fake.Disable(res.Subscription.ID))
	subs, err := f.api.List(ctx)
	require.NoError(t, err)
	require.Len(t, subs, 1)
	assert.Equal(t, providers.SubscriptionDisabled, subs[0].State)
	enabled, err := f.api.Connect(ctx, target, "unused")
	require.NoError(t, err)
	assert.Equal(t, providers.ConnectEnabled, enabled.Action)
	assert.Equal(t, res.Subscription.ID, enabled.Subscription.ID, "enabled in place")
	assert.Equal(t, providers.SubscriptionActive, enabled.Subscription.State)
	assert.Empty(t, enabled.Secret, "an enabled endpoint keeps its secret")
	assert.Equal(t, "enabled", f.fake.Endpoints()[0].Status)
}

func TestConnectAddsMissingTypesAndReportsTheLimit(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, time.Unix(1_800_000_000, 0), 0)
	raw := &providers.API{Provider: "stripe", Base: f.fake.URL(), Auth: func(r *http.Request) { r.SetBasicAuth(testKey, "") }}
	const target = "https://ledger.example.com/webhooks/stripe"
	_, err := raw.DoForm(ctx, http.MethodPost, "/v1/webhook_endpoints", nil, nil,
		url.Values{"url": {target}, "enabled_events[]": {"customer.created", stripe.TypeChargeRefunded}}, nil)
	require.NoError(t, err)

	res, err := f.api.Connect(ctx, target, "")
	require.NoError(t, err)
	assert.Equal(t, providers.ConnectUpdated, res.Action)
	got := f.fake.Endpoints()[0].Events
	assert.Subset(t, got, stripe.Types())
	assert.Contains(t, got, "customer.created", "the endpoint's own types are kept")

	for i := len(f.fake.Endpoints()); i < stripeapi.MaxEndpoints; i++ {
		_, err := raw.DoForm(ctx, http.MethodPost, "/v1/webhook_endpoints", nil, nil,
			url.Values{"url": {fmt.Sprintf("https://other.example.com/%d", i)}, "enabled_events[]": {"*"}}, nil)
		require.NoError(t, err)
	}
	_, err = f.api.Connect(ctx, "https://ledger.example.com/webhooks/stripe-2", "")
	assert.ErrorIs(t, err, providers.ErrAPIRequest, "Stripe allows 16 endpoints")
	assert.Contains(t, err.Error(), "maximum of 16")
}
