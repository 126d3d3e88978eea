package alerts_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/alerts"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/standard"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

type received struct {
	h    http.Header
	body []byte
}

func receiver(t *testing.T, status int) (*httptest.Server, chan received) {
	t.Helper()
	got := make(chan received, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- received{r.Header.Clone(), b}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func TestStandardAlertIsATypedMessageThatVerifies(t *testing.T) {
	srv, got := receiver(t, http.StatusNoContent)
	at := time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
	cfg := alerts.Config{URL: srv.URL, Secret: secret}
	require.NoError(t, cfg.Check())
	require.NoError(t, alerts.Send(context.Background(), srv.Client(), cfg, alerts.Message{
		ID: "provider_alert_7", Type: "provider.missed_webhooks", At: at, Text: "found 2",
		Data: map[string]any{"provider": "calendly", "text": "found 2"}}, time.Now()))
	r := <-got
	p, err := standard.New(providers.NewSecrets(secret), time.Minute)
	require.NoError(t, err)
	_, err = p.Verify(r.h, r.body, time.Now())
	require.NoError(t, err, "the Standard Webhooks rules verify it")
	assert.Equal(t, "provider_alert_7", r.h.Get("webhook-id"))
	var m struct {
		Type      string         `json:"type"`
		Timestamp time.Time      `json:"timestamp"`
		Data      map[string]any `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.body, &m))
	assert.Equal(t, "provider.missed_webhooks", m.Type)
	assert.True(t, at.Equal(m.Timestamp))
	assert.Equal(t, map[string]any{"provider": "calendly", "text": "found 2"}, m.Data)
}

func TestSlackAlertSendsTheTextAndAFailureIsReturned(t *testing.T) {
	srv, got := receiver(t, http.StatusInternalServerError)
	err := alerts.Send(context.Background(), srv.Client(), alerts.Config{URL: srv.URL, Format: alerts.FormatSlack},
		alerts.Message{ID: "a", Type: "t", Text: "the calendly subscription is disabled"}, time.Now())
	require.Error(t, err)
	assert.NotErrorIs(t, err, alerts.ErrPermanent, "a 500 may pass: the caller retries")
	assert.JSONEq(t, `{"text":"the calendly subscription is disabled"}`, string((<-got).body))
}

func TestCheckRefusesAStandardAlertWithoutASecretAndUnknownFormats(t *testing.T) {
	assert.Error(t, alerts.Config{URL: "https://x.example"}.Check())
	assert.Error(t, alerts.Config{URL: "https://x.example", Format: "xml"}.Check())
	assert.NoError(t, alerts.Config{}.Check(), "no URL: log and metrics only")
}
