package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/stripe"
)

// The Stripe API sink: its two env lines point a Stripe API client at it; a body `send stripe`
// builds, posted to /_fake/deliveries, is an event the sync reads and maps; connect creates an
// endpoint, and each request is printed.
func TestStripeAPIDevSinkServesTheSync(t *testing.T) {
	envFile := filepath.Join(t.TempDir(), "sinks.env")
	out := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dev-sinks", "--only", "stripeapi", "--env-file", envFile}, func(string) string { return "" }, out, out)
	}()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "dev-sinks: ready") }, 10*time.Second, 10*time.Millisecond)
	raw, err := os.ReadFile(envFile)
	require.NoError(t, err)
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		k, v, ok := strings.Cut(line, "=")
		require.True(t, ok, line)
		env[k] = v
	}
	require.Len(t, env, 2, "%s", raw)
	assert.Equal(t, devStripeAPIKey, env[envStripeAPIKey])
	require.Contains(t, env[envStripeAPIURL], "http://127.0.0.1:")

	body, err := sample.Body(stripe.Name, stripe.TypePaymentIntentSucceeded, sample.Params{Booking: "42"})
	require.NoError(t, err)
	resp, err := http.Post(env[envStripeAPIURL]+"/_fake/deliveries", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	api := stripe.NewAPI(stripe.APIConfig{Key: env[envStripeAPIKey], URL: env[envStripeAPIURL]})
	var items []providers.SyncItem
	require.NoError(t, api.Sync(context.Background(), providers.SyncWindow{}, func(p providers.SyncPage) error {
		items = append(items, p.Items...)
		return nil
	}))
	require.Len(t, items, 1)
	require.NoError(t, items[0].Err)
	webhook, err := stripe.New(providers.NewSecrets("whsec_x"), 0).Map(context.Background(), nil, body, time.Now())
	require.NoError(t, err)
	assert.Equal(t, webhook, items[0].Mapped, "the sync maps the delivery's event as the webhook")

	res, err := api.Connect(context.Background(), "https://ledger.example.com/webhooks/stripe", "")
	require.NoError(t, err)
	assert.Equal(t, providers.ConnectCreated, res.Action)
	assert.NotContains(t, out.String(), "stripeapi: GET /v1/events", "a read that succeeded is not printed: the sync reads every few seconds")
	assert.Contains(t, out.String(), "stripeapi: POST /v1/webhook_endpoints 200\n")
	assert.NotContains(t, out.String(), res.Secret, "the secret is never printed")
}
