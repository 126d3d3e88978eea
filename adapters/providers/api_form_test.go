package providers_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
)

// seen is what a test server received, one entry per request.
type seen struct {
	contentType, idempotencyKey, body string
}

// recordingServer answers statuses in turn (the last one repeats) with bodies, and records requests.
func recordingServer(t *testing.T, statuses []int, bodies []string) (*httptest.Server, func() []seen) {
	t.Helper()
	var (
		mu  sync.Mutex
		got []seen
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		i := min(len(got), len(statuses)-1)
		got = append(got, seen{r.Header.Get("Content-Type"), r.Header.Get("Idempotency-Key"), string(b)})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(statuses[i])
		_, _ = io.WriteString(w, bodies[i])
	}))
	t.Cleanup(srv.Close)
	return srv, func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return append([]seen(nil), got...)
	}
}

func TestDoFormSendsAFormAndRetriesWithTheSameKey(t *testing.T) {
	srv, requests := recordingServer(t,
		[]int{http.StatusTooManyRequests, http.StatusOK},
		[]string{`{"error":{"type":"invalid_request_error","code":"rate_limit","message":"Too many requests"}}`, `{"id":"we_1"}`})
	var waits []time.Duration
	a := &providers.API{Provider: "stripe", Base: srv.URL, Sleep: func(_ context.Context, d time.Duration) error {
		waits = append(waits, d)
		return nil
	}}
	form := url.Values{"url": {"https://ledger.example.com/webhooks/stripe"}, "enabled_events[]": {"a.b", "c.d"}}
	var out struct{ ID string }
	_, err := a.DoForm(context.Background(), http.MethodPost, "/v1/webhook_endpoints", nil,
		http.Header{"Idempotency-Key": {"k-1"}}, form, &out)
	require.NoError(t, err)
	assert.Equal(t, "we_1", out.ID)
	assert.Equal(t, []time.Duration{time.Second}, waits, "a 429 without Retry-After waits the first backoff")
	got := requests()
	require.Len(t, got, 2)
	for _, r := range got {
		assert.Equal(t, seen{"application/x-www-form-urlencoded", "k-1", form.Encode()}, r, "every attempt sends the same form and key")
	}
}

func TestDoFormErrorsCarryTheirSentinel(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   error
		msg    string
	}{
		{"refused", http.StatusBadRequest, `{"error":{"type":"invalid_request_error","message":"You have reached the maximum of 16 test webhook endpoints."}}`, providers.ErrAPIRequest, "maximum of 16"},
		{"bad key", http.StatusUnauthorized, `{"error":{"type":"invalid_request_error","message":"Invalid API Key provided: sk_test_****"}}`, providers.ErrAPIAuth, "Invalid API Key"},
		{"missing", http.StatusNotFound, `{"error":{"type":"invalid_request_error","message":"No such webhook endpoint: 'we_x'"}}`, providers.ErrAPINotFound, "No such webhook endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, requests := recordingServer(t, []int{tt.status}, []string{tt.body})
			a := &providers.API{Provider: "stripe", Base: srv.URL}
			_, err := a.DoForm(context.Background(), http.MethodPost, "/v1/webhook_endpoints/we_x", nil, nil, url.Values{"disabled": {"false"}}, nil)
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.want)
			var apiErr *providers.APIError
			require.ErrorAs(t, err, &apiErr)
			assert.Contains(t, apiErr.Message, tt.msg)
			assert.Len(t, requests(), 1, "a 4xx is final")
		})
	}
}

// The refactor that lets DoForm share the request loop keeps Do's JSON body.
func TestDoStillSendsJSON(t *testing.T) {
	srv, requests := recordingServer(t, []int{http.StatusOK}, []string{`{}`})
	a := &providers.API{Provider: "calcom", Base: srv.URL}
	_, err := a.Do(context.Background(), http.MethodPost, "/v2/webhooks", nil, map[string]any{"active": true}, nil)
	require.NoError(t, err)
	got := requests()
	require.Len(t, got, 1)
	assert.Equal(t, seen{contentType: "application/json", body: `{"active":true}`}, got[0])
}
