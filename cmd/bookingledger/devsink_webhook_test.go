package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The webhook sink prints each message it receives, fails with the status it is told to until told
// to stop, and prints alerts.
func TestWebhookDevSinkReportsMessagesAndFailsOnRequest(t *testing.T) {
	envFile := filepath.Join(t.TempDir(), "sinks.env")
	out := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dev-sinks", "--only", "webhook", "--env-file", envFile}, func(string) string { return "" }, out, out)
	}()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "dev-sinks: ready") }, 10*time.Second, 10*time.Millisecond)
	raw, err := os.ReadFile(envFile)
	require.NoError(t, err)
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	assert.Equal(t, "true", env[envRelayAllowPrivate])
	assert.Equal(t, "slack", env["BOOKINGLEDGER_ALERT_FORMAT"])

	post := func(url, body string, h map[string]string) int {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		require.NoError(t, err)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	msg := `{"type":"booking.scheduled.v1","data":{"booking":"calendly-x","version":1}}`
	hdr := map[string]string{"webhook-id": "msg_1", "webhook-signature": "v1,a v1,b"}
	assert.Equal(t, http.StatusNoContent, post(env[envDevWebhookURL], msg, hdr))
	require.Eventually(t, func() bool {
		return strings.Contains(out.String(), "webhook: 204 msg_1 booking.scheduled.v1 calendly-x@1 (2 signature(s))")
	}, 5*time.Second, 10*time.Millisecond)

	assert.Equal(t, http.StatusNoContent, post(env["BOOKINGLEDGER_DEV_WEBHOOK_CONTROL"]+"?fail=503", "", nil))
	assert.Equal(t, http.StatusServiceUnavailable, post(env[envDevWebhookURL], msg, hdr))
	assert.Equal(t, http.StatusBadRequest, post(env["BOOKINGLEDGER_DEV_WEBHOOK_CONTROL"]+"?fail=abc", "", nil))
	assert.Equal(t, http.StatusNoContent, post(env["BOOKINGLEDGER_DEV_WEBHOOK_CONTROL"]+"?fail=0", "", nil))
	assert.Equal(t, http.StatusNoContent, post(env[envDevWebhookURL], msg, hdr))
	assert.Equal(t, http.StatusNoContent, post(env["BOOKINGLEDGER_ALERT_URL"], `{"text":"endpoint 1 failed 1 time(s) in a row"}`, nil))
	require.Eventually(t, func() bool {
		s := out.String()
		return strings.Contains(s, "webhook: control: failing with 503") && strings.Contains(s, "webhook: 503 msg_1") &&
			strings.Contains(s, "webhook: control: succeeding again") && strings.Contains(s, "webhook: alert: endpoint 1 failed 1 time(s) in a row")
	}, 5*time.Second, 10*time.Millisecond, out.String())
}
