package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/privacy"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providers/calendly/calendlyapi"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

const syncAlertSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// The whole provider sync as a user runs it, against serve and a fake of Calendly's API: a booking
// whose webhook never came is found by `sync` (with a dry run first), recorded once with the webhook's
// event ID, and the calendar shows it; `providers connect` creates the subscription, whose new signing
// key verifies a webhook at once; a subscription Calendly disables is noticed by serve's watch (an
// item and a signed alert) and re-created by connect.
func TestProviderSyncAndConnectEndToEnd(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	api, err := calendlyapi.Start(calendlyapi.Config{Token: "tok-1"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = api.Close() })
	alerts := newHookSink(t)
	alerts.setSecret(syncAlertSecret)
	env := envOf(map[string]string{
		envDatabaseURL:                           servetest.NewDatabaseURL(t),
		"BOOKINGLEDGER_ADDR":                     "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS":    demoCalendlyKey,
		envCalendlyAPIToken:                      "tok-1",
		envCalendlyAPIURL:                        api.URL(),
		"BOOKINGLEDGER_SYNC_BACK":                "1s", // the periodic window holds none of the test's bookings
		"BOOKINGLEDGER_SYNC_AHEAD":               "1s",
		"BOOKINGLEDGER_PROVIDERS_WATCH_INTERVAL": "1s",
		"BOOKINGLEDGER_ALERT_URL":                alerts.srv.URL,
		"BOOKINGLEDGER_ALERT_SECRET":             syncAlertSecret,
		"BOOKINGLEDGER_RELAY_ALLOW_PRIVATE":      "true",
		"BOOKINGLEDGER_DRAIN_TIMEOUT":            "5s",
		privacy.EnvMasterKey:                     testMasterKey,
	})
	srv := startServe(t, env)
	const from, to = "2030-01-06T00:00:00Z", "2030-01-09T00:00:00Z"

	// a1's webhook came (the fake is told too); a2's never did.
	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "a1", "--start", "2030-01-07T09:00:00Z", "--tell-fake-api")
	out, errOut, code := cli(t, env, "send", "calendly", "invitee.created", "--booking", "a2", "--start", "2030-01-07T11:00:00Z", "--missed", "--url", srv.Base)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "calendly fake API: recorded at the provider; no webhook sent\n", out)
	waitForCalendar(t, srv.AdminToken(t), srv.Admin, from, to, map[string]string{"calendly-a1": "active"})

	out, errOut, code = cli(t, env, "sync", "calendly", "--from", from, "--to", to, "--dry-run", "--json")
	require.Equal(t, 0, code, errOut)
	var dry map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &dry), out)
	assert.Equal(t, map[string]any{"provider": "calendly", "fetched": 2.0, "recorded": 1.0, "already": 1.0, "dry_run": true},
		pick(dry, "provider", "fetched", "recorded", "already", "dry_run"))
	time.Sleep(200 * time.Millisecond)
	waitForCalendar(t, srv.AdminToken(t), srv.Admin, from, to, map[string]string{"calendly-a1": "active"}) // nothing recorded

	out, errOut, code = cli(t, env, "sync", "calendly", "--from", from, "--to", to, "--json")
	require.Equal(t, 0, code, errOut)
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, map[string]any{"provider": "calendly", "fetched": 2.0, "recorded": 1.0, "already": 1.0, "dry_run": false},
		pick(res, "provider", "fetched", "recorded", "already", "dry_run"))
	waitForCalendar(t, srv.AdminToken(t), srv.Admin, from, to, map[string]string{"calendly-a1": "active", "calendly-a2": "active"})

	// The late webhook of what the sync found is a duplicate: one event per fact.
	out = send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "a2", "--start", "2030-01-07T11:00:00Z")
	assert.Contains(t, out, `"status":"duplicate"`)
	out, errOut, code = cli(t, env, "sync", "calendly", "--from", from, "--to", to)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "fetched 2, recorded 0 (0 event(s)), already recorded 2")
	out, errOut, code = cli(t, env, "history", "calendly-a2")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "(by sync: no webhook had brought it)")

	// Connect: the subscription is created with a key bookingledger chose, which serve verifies at once.
	const hook = "https://ledger.example.com/webhooks/calendly"
	out, errOut, code = cli(t, env, "providers", "connect", "calendly", "--url", hook)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `^calendly subscription \S+ for `+hook+`: created \(active\); its new signing secret is stored sealed`, out)
	subs := api.Subscriptions()
	require.Len(t, subs, 1)
	assert.NotContains(t, out+errOut, subs[0].SigningKey, "the secret is never printed")
	out, _, code = cli(t, env, "providers", "connect", "calendly", "--url", hook)
	require.Equal(t, 0, code)
	assert.Contains(t, out, ": unchanged (active)")
	body, err := sample.Body("calendly", "invitee.created", sample.Params{Booking: "a3", Host: sample.DefaultHost, Start: time.Date(2030, 1, 8, 9, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	status, answer := postSigned(t, srv.Base+"/webhooks/calendly", body, calendly.Sign(subs[0].SigningKey, time.Now(), body))
	assert.Equal(t, http.StatusOK, status, "the stored key verifies without a restart: %s", answer)

	// Calendly disables it: the watch notices, an item and a signed alert say so; connect re-creates it.
	require.NoError(t, api.DisableSubscription(subs[0].URI))
	// Polled on the read API, over serve's pool: a CLI run per poll opens a pool of its own.
	waitFor(t, 30*time.Second, "the watch's item", func() (bool, string) {
		body := getJSON(t, srv.AdminToken(t), srv.Admin+"/api/reconciliation", &itemsAnswer{})
		return strings.Contains(body, "calendly subscription"), body
	})
	out, _, code = cli(t, env, "reconcile", "list")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "calendly subscription")
	waitFor(t, 30*time.Second, "the alert", func() (bool, string) {
		_, bodies, bad := alerts.received()
		all := strings.Join(bodies, "\n")
		// First the sync's missed_webhooks alert (a2), then the watch's; all verify.
		return strings.Contains(all, `"type":"provider.missed_webhooks"`) && strings.Contains(all, `"type":"provider.subscription_disabled"`) && len(bad) == 0,
			strings.Join(append(bodies, bad...), "\n")
	})
	out, errOut, code = cli(t, env, "providers", "status", "--json")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"state": "disabled"`)
	out, _, code = cli(t, env, "providers", "connect", "calendly", "--url", hook)
	require.Equal(t, 0, code)
	assert.Contains(t, out, ": recreated (active)")
	waitFor(t, 30*time.Second, "the item closed by the watch", func() (bool, string) {
		body := getJSON(t, srv.AdminToken(t), srv.Admin+"/api/reconciliation", &itemsAnswer{})
		return !strings.Contains(body, "calendly subscription"), body
	})
	out, _, code = cli(t, env, "reconcile", "list")
	require.Equal(t, 0, code)
	assert.NotContains(t, out, "calendly subscription")
	out, _, code = cli(t, env, "providers", "status")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "calendly\n  API: configured ("+api.URL()+")\n  webhook URL: "+hook+"\n")
	assert.Contains(t, out, "stripe\n  API: not configured, webhooks only (set BOOKINGLEDGER_STRIPE_API_KEY to sync and watch)\n")
}

func TestSyncAndConnectRefuseWhatCannotWork(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	env := envOf(map[string]string{envDatabaseURL: "postgres://127.0.0.1:1/x"})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sync", "calendly", "--from", "2030-01-01T00:00:00Z", "--to", "2030-01-02T00:00:00Z"}, "calendly: no API credential configured (set BOOKINGLEDGER_CALENDLY_API_TOKEN)"},
		{[]string{"sync", "nope", "--from", "2030-01-01T00:00:00Z", "--to", "2030-01-02T00:00:00Z"}, `unknown provider "nope"`},
		{[]string{"sync", "calendly", "--from", "2030-01-02T00:00:00Z", "--to", "2030-01-01T00:00:00Z"}, "--to must be after --from"},
		{[]string{"sync", "calendly"}, "sync wants --from and --to"},
		{[]string{"providers", "connect", "calendly"}, "providers connect wants --url"},
		{[]string{"providers", "connect", "calendly", "--url", "https://x.example/hooks"}, "does not end in /webhooks/calendly"},
		{[]string{"providers", "frobnicate"}, `unknown subcommand "frobnicate"`},
		{[]string{"send", "calendly", "invitee.created", "--missed", "--secret", "k"}, "BOOKINGLEDGER_CALENDLY_API_URL to name a dev fake on a loopback address"},
	} {
		_, errOut, code := cli(t, env, c.args...)
		assert.Equal(t, 2, code, "%v: %s", c.args, errOut)
		assert.Contains(t, errOut, c.want, c.args)
	}
}

func pick(m map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

func postSigned(t *testing.T, url string, body []byte, signature string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set(calendly.SignatureHeader, signature)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// Two serves on one database both run the periodic sync (River inserts it on the leader; a standby
// takes over): what the webhooks missed is appended once, whichever runs it, however often.
func TestTwoServesSyncPeriodicallyWithoutDoubles(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	api, err := calendlyapi.Start(calendlyapi.Config{Token: "tok-2"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = api.Close() })
	start := time.Now().Add(24 * time.Hour).Truncate(time.Hour).UTC()
	var bookings []string
	for i := range 6 {
		inv := api.Schedule(calendlyapi.Booking{Start: start.Add(time.Duration(i) * time.Hour), End: start.Add(time.Duration(i)*time.Hour + 30*time.Minute)})
		bookings = append(bookings, "calendly-"+inv.URI[strings.LastIndex(inv.URI, "/")+1:])
	}
	dbURL := servetest.NewDatabaseURL(t)
	env := envOf(map[string]string{
		envDatabaseURL:                        dbURL,
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		envCalendlyAPIToken:                   "tok-2",
		envCalendlyAPIURL:                     api.URL(),
		"BOOKINGLEDGER_SYNC_INTERVAL":         "1s",
		"BOOKINGLEDGER_DRAIN_TIMEOUT":         "5s",
		privacy.EnvMasterKey:                  testMasterKey,
	})
	a, b := startServe(t, env), startServe(t, env)
	want := map[string]string{}
	for _, id := range bookings {
		want[id] = "active"
	}
	waitForCalendar(t, a.AdminToken(t), b.Admin, start.Add(-time.Hour).Format(time.RFC3339), start.Add(24*time.Hour).Format(time.RFC3339), want)
	a.Stop(t) // the leader may change: the other one syncs on
	time.Sleep(3 * time.Second)
	pool := pgtest.Open(t, dbURL)
	var events, streams int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*), count(DISTINCT stream_id) FROM events WHERE stream_id LIKE 'booking-calendly-%'`).Scan(&events, &streams))
	assert.Equal(t, 6, streams)
	assert.Equal(t, 6, events, "each missed create appended once across both serves' runs")
	var missed int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT missed_total FROM provider_sync_state WHERE provider = 'calendly'`).Scan(&missed))
	assert.Equal(t, int64(6), missed)
}
