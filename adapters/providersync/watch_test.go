package providersync_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/privacy"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providersync"
)

// fakeSubs is a provider's subscription list that Connect fixes the way Calendly does: a disabled
// subscription is deleted and created anew with the offered secret.
type fakeSubs struct {
	mu       sync.Mutex
	list     []providers.Subscription
	connects int
	creates  int
	next     int
}

func (f *fakeSubs) Name() string { return calendly.Name }

func (f *fakeSubs) List(context.Context) ([]providers.Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]providers.Subscription(nil), f.list...), nil
}

func (f *fakeSubs) Connect(_ context.Context, url, secret string) (providers.ConnectResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connects++
	action := providers.ConnectCreated
	kept := f.list[:0]
	for _, s := range f.list {
		switch {
		case s.URL == url && s.State == providers.SubscriptionActive:
			return providers.ConnectResult{Subscription: s, Action: providers.ConnectUnchanged}, nil
		case s.URL == url:
			action = providers.ConnectRecreated
		default:
			kept = append(kept, s)
		}
	}
	f.next++
	f.creates++
	s := providers.Subscription{ID: "sub-" + string(rune('0'+f.next)), URL: url, Events: []string{"invitee.created"}, State: providers.SubscriptionActive}
	f.list = append(kept, s)
	return providers.ConnectResult{Subscription: s, Action: action, Secret: secret}, nil
}

func (f *fakeSubs) disable() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.list {
		f.list[i].State = providers.SubscriptionDisabled
	}
}

const hookURL = "https://ledger.example.com/webhooks/calendly"

func keyring(t *testing.T) *privacy.Keyring {
	t.Helper()
	k, err := privacy.ParseKeyring(privacy.GenerateMasterKey("k1"))
	require.NoError(t, err)
	return k
}

func (e *env) watcher(subs *fakeSubs, box providersync.SecretBox, repair bool) *providersync.Watcher {
	return providersync.NewWatcher(providersync.WatchConfig{Store: e.store, Subscriptions: []providersync.Subscriptions{subs},
		Box: box, Alerts: e.alerts, Repair: repair})
}

func (e *env) openItems(t *testing.T, subject string) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM reconciliation_items WHERE kind = 'sync' AND subject = $1 AND closed_at IS NULL`, subject).Scan(&n))
	return n
}

func TestConnectIsIdempotentAndItsSecretVerifiesWithoutARestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	subs := &fakeSubs{}
	box := keyring(t)
	w := e.watcher(subs, box, false)
	ss := &providersync.StoredSecrets{Store: e.store, Box: box, Refresh: time.Nanosecond}
	build := func(s providers.Secrets) providers.Provider { return calendly.New(s, time.Minute) }
	// serve runs with no signing key configured: before connect every delivery is refused.
	p := ss.Wrap(build(providers.Secrets{}), 0, build)

	res, err := w.Connect(context.Background(), calendly.Name, hookURL)
	require.NoError(t, err)
	assert.Equal(t, providers.ConnectCreated, res.Action)
	require.NotEmpty(t, res.Secret)

	body := []byte(`{"event":"invitee.created"}`)
	now := time.Now()
	h := http.Header{}
	h.Set(calendly.SignatureHeader, calendly.Sign(res.Secret, now, body))
	v, err := p.Verify(h, body, now)
	require.NoError(t, err, "the secret connect created verifies at once")
	assert.Equal(t, 0, v.SecretIndex)

	h.Set(calendly.SignatureHeader, calendly.Sign("some other key", now, body))
	_, err = p.Verify(h, body, now)
	assert.ErrorIs(t, err, providers.ErrBadSignature)

	again, err := w.Connect(context.Background(), calendly.Name, hookURL)
	require.NoError(t, err)
	assert.Equal(t, providers.ConnectUnchanged, again.Action)
	assert.Equal(t, 1, subs.creates, "a second connect changes nothing")

	st, err := e.store.State(context.Background(), calendly.Name)
	require.NoError(t, err)
	assert.Equal(t, hookURL, st.WebhookURL)
	assert.Equal(t, 0, st.Unhealthy)

	var sealed []byte
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT sealed FROM provider_secrets`).Scan(&sealed))
	assert.NotContains(t, string(sealed), res.Secret, "the secret is stored sealed")
}

func TestDisabledSubscriptionAlertsOpensAnItemAndIsRepairedOnce(t *testing.T) {
	t.Parallel()
	for _, repair := range []bool{false, true} {
		t.Run(map[bool]string{false: "watch only", true: "repair on"}[repair], func(t *testing.T) {
			e := newEnv(t)
			subs := &fakeSubs{}
			w := e.watcher(subs, keyring(t), repair)
			_, err := w.Connect(context.Background(), calendly.Name, hookURL)
			require.NoError(t, err)
			subs.disable()

			c, err := w.Check(context.Background(), calendly.Name)
			require.NoError(t, err)
			assert.Equal(t, 2, c.Unhealthy, "the disabled subscription, and none active")
			assert.Equal(t, []string{"calendly subscription_disabled"}, e.alerts.list())
			var items int
			require.NoError(t, e.pool.QueryRow(context.Background(),
				`SELECT count(*) FROM reconciliation_items WHERE kind = 'sync' AND subject = 'calendly subscription'`).Scan(&items))
			assert.Equal(t, 1, items, "the item an operator sees in the inbox's history")
			st, err := e.store.State(context.Background(), calendly.Name)
			require.NoError(t, err)
			if repair {
				assert.Equal(t, 0, e.openItems(t, "calendly subscription"), "repaired at once: the item closed")
				assert.Equal(t, 0, st.Unhealthy, "the gauge's value after the repair")
			} else {
				assert.Equal(t, 1, e.openItems(t, "calendly subscription"))
				assert.Equal(t, 2, st.Unhealthy, "the gauge's value")
			}

			c2, err := w.Check(context.Background(), calendly.Name)
			require.NoError(t, err)
			assert.Equal(t, []string{"calendly subscription_disabled"}, e.alerts.list(), "one alert per item")
			if !repair {
				assert.Nil(t, c.Repaired)
				assert.Equal(t, 1, subs.creates)
				return
			}
			require.NotNil(t, c.Repaired)
			assert.Equal(t, providers.ConnectRecreated, c.Repaired.Action)
			assert.Nil(t, c2.Repaired, "the second check finds it active")
			assert.Equal(t, 2, subs.creates, "re-created once over two checks")
			assert.Equal(t, 0, e.openItems(t, "calendly subscription"), "a healthy check closes the item")
		})
	}
}

func TestBeforeConnectOnlyADisabledSubscriptionIsAProblem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	subs := &fakeSubs{}
	w := e.watcher(subs, keyring(t), true)
	c, err := w.Check(context.Background(), calendly.Name)
	require.NoError(t, err)
	assert.Empty(t, c.Problems, "no URL is known: none at all may be a subscription through a proxy path")
	assert.Zero(t, e.openItems(t, "calendly subscription"))

	subs.list = []providers.Subscription{{ID: "s1", URL: "https://x.example/hooks/webhooks/calendly", State: providers.SubscriptionDisabled}}
	c, err = w.Check(context.Background(), calendly.Name)
	require.NoError(t, err)
	assert.Equal(t, []string{"calendly subscription s1 for https://x.example/hooks/webhooks/calendly is disabled"}, c.Problems)
	assert.Nil(t, c.Repaired, "no URL is known to repair for")
	var reason string
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT reason FROM reconciliation_items WHERE kind = 'sync'`).Scan(&reason))
	assert.Contains(t, reason, "bookingledger providers connect")
}
