package stripeapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers/stripe/stripeapi"
)

const key = "sk_test_fake"

var now = time.Unix(1_800_000_000, 0)

func start(t *testing.T, rate int, onRequest func(stripeapi.Request)) *stripeapi.Server {
	t.Helper()
	s, err := stripeapi.Start(stripeapi.Config{Key: key, RatePerSecond: rate, Now: func() time.Time { return now }, OnRequest: onRequest})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

// call sends a request (a form body when form is set) and returns the status and decoded answer.
func call(t *testing.T, s *stripeapi.Server, method, path, authKey string, form url.Values, header http.Header) (int, map[string]any) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, s.URL()+path, body)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if authKey != "" {
		req.SetBasicAuth(authKey, "")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var doc map[string]any
	if resp.StatusCode != http.StatusNoContent {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&doc))
	}
	return resp.StatusCode, doc
}

func addEvents(t *testing.T, s *stripeapi.Server, n int, typ string, created int64) {
	t.Helper()
	for i := range n {
		require.NoError(t, s.AddEvent([]byte(fmt.Sprintf(`{"id":"evt_%s_%d","object":"event","type":%q,"created":%d,"data":{"object":{}}}`, typ, i, typ, created+int64(i)))))
	}
}

func TestEventListAnswersAsStripeDocuments(t *testing.T) {
	s := start(t, 1000, nil)
	addEvents(t, s, 15, "charge.refunded", now.Add(-time.Hour).Unix())
	addEvents(t, s, 2, "customer.created", now.Add(-time.Hour).Unix())
	addEvents(t, s, 1, "charge.refunded", now.Add(-31*24*time.Hour).Unix())
	count := func(doc map[string]any) int { return len(doc["data"].([]any)) }

	tests := []struct {
		name    string
		query   string
		auth    string
		status  int
		n       int
		hasMore bool
		errType string
	}{
		{name: "no key", query: "", status: 401, errType: "invalid_request_error"},
		{name: "wrong key", query: "", auth: "sk_test_other", status: 401, errType: "invalid_request_error"},
		{name: "default limit is 10", query: "", auth: key, status: 200, n: 10, hasMore: true},
		{name: "limit 100, 30 days only", query: "limit=100", auth: key, status: 200, n: 17},
		{name: "limit 0", query: "limit=0", auth: key, status: 400, errType: "invalid_request_error"},
		{name: "limit 101", query: "limit=101", auth: key, status: 400, errType: "invalid_request_error"},
		{name: "types[]", query: "limit=100&types[]=customer.created", auth: key, status: 200, n: 2},
		{name: "type group", query: "limit=100&type=charge.*", auth: key, status: 200, n: 15},
		{name: "type and types", query: "type=a&types[]=b", auth: key, status: 400, errType: "invalid_request_error"},
		{name: "21 types", query: "types[]=" + strings.Repeat("a&types[]=", 20) + "a", auth: key, status: 400, errType: "invalid_request_error"},
		{name: "created range", query: fmt.Sprintf("limit=100&created[gte]=%d&created[lte]=%d", now.Add(-time.Hour).Unix()+5, now.Add(-time.Hour).Unix()+9), auth: key, status: 200, n: 5},
		{name: "starting_after", query: "limit=100&types[]=charge.refunded&starting_after=evt_charge.refunded_10", auth: key, status: 200, n: 10},
		{name: "unknown starting_after", query: "starting_after=evt_nope", auth: key, status: 400, errType: "invalid_request_error"},
		{name: "unknown parameter", query: "types=charge.refunded", auth: key, status: 400, errType: "invalid_request_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, doc := call(t, s, http.MethodGet, "/v1/events?"+tt.query, tt.auth, nil, nil)
			require.Equal(t, tt.status, status, doc)
			if tt.errType != "" {
				e := doc["error"].(map[string]any)
				assert.Equal(t, tt.errType, e["type"])
				assert.NotEmpty(t, e["message"])
				return
			}
			assert.Equal(t, "list", doc["object"])
			assert.Equal(t, tt.n, count(doc))
			assert.Equal(t, tt.hasMore, doc["has_more"])
		})
	}

	_, doc := call(t, s, http.MethodGet, "/v1/events?limit=3&types[]=charge.refunded", key, nil, nil)
	var ids []string
	for _, e := range doc["data"].([]any) {
		ids = append(ids, e.(map[string]any)["id"].(string))
	}
	assert.Equal(t, []string{"evt_charge.refunded_14", "evt_charge.refunded_13", "evt_charge.refunded_12"}, ids, "newest first")
}

func TestWebhookEndpoints(t *testing.T) {
	s := start(t, 1000, nil)
	form := url.Values{"url": {"https://ledger.example.com/webhooks/stripe"}, "enabled_events[]": {"charge.refunded"}}
	idem := http.Header{"Idempotency-Key": {"k1"}}

	status, created := call(t, s, http.MethodPost, "/v1/webhook_endpoints", key, form, idem)
	require.Equal(t, 200, status, created)
	assert.Regexp(t, `^whsec_`, created["secret"], "the secret comes with the create answer")
	assert.Equal(t, "enabled", created["status"])

	status, replayed := call(t, s, http.MethodPost, "/v1/webhook_endpoints", key, form, idem)
	require.Equal(t, 200, status)
	assert.Equal(t, created["id"], replayed["id"], "the same key replays the first answer")
	status, _ = call(t, s, http.MethodPost, "/v1/webhook_endpoints", key, url.Values{"url": {"https://x.example.com"}, "enabled_events[]": {"*"}}, idem)
	assert.Equal(t, 400, status, "the same key with other parameters")
	require.Len(t, s.Endpoints(), 1)

	id := created["id"].(string)
	status, got := call(t, s, http.MethodGet, "/v1/webhook_endpoints/"+id, key, nil, nil)
	require.Equal(t, 200, status)
	assert.NotContains(t, got, "secret", "never again after the create")

	require.NoError(t, s.Disable(id))
	status, list := call(t, s, http.MethodGet, "/v1/webhook_endpoints", key, nil, nil)
	require.Equal(t, 200, status)
	assert.Equal(t, "disabled", list["data"].([]any)[0].(map[string]any)["status"])
	status, updated := call(t, s, http.MethodPost, "/v1/webhook_endpoints/"+id, key, url.Values{"disabled": {"false"}}, nil)
	require.Equal(t, 200, status)
	assert.Equal(t, "enabled", updated["status"])
	status, _ = call(t, s, http.MethodPost, "/v1/webhook_endpoints/we_nope", key, url.Values{"disabled": {"false"}}, nil)
	assert.Equal(t, 404, status)

	for i := 1; i < stripeapi.MaxEndpoints; i++ {
		status, _ := call(t, s, http.MethodPost, "/v1/webhook_endpoints", key, url.Values{"url": {fmt.Sprintf("https://e%d.example.com", i)}, "enabled_events[]": {"*"}}, nil)
		require.Equal(t, 200, status)
	}
	status, refused := call(t, s, http.MethodPost, "/v1/webhook_endpoints", key, url.Values{"url": {"https://e17.example.com"}, "enabled_events[]": {"*"}}, nil)
	assert.Equal(t, 400, status)
	assert.Contains(t, refused["error"].(map[string]any)["message"], "maximum of 16")
	status, _ = call(t, s, http.MethodPost, "/v1/webhook_endpoints", key, url.Values{"url": {"https://e.example.com"}}, nil)
	assert.Equal(t, 400, status, "enabled_events is required")
}

func TestBudgetAnswers429AndCounts(t *testing.T) {
	var (
		mu   sync.Mutex
		seen []stripeapi.Request
	)
	s := start(t, 2, func(r stripeapi.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r)
	})
	var statuses []int
	for range 3 {
		status, _ := call(t, s, http.MethodGet, "/v1/webhook_endpoints", key, nil, nil)
		statuses = append(statuses, status)
	}
	assert.Equal(t, []int{200, 200, 429}, statuses)
	assert.Equal(t, 3, s.Requests())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 3)
	assert.Equal(t, stripeapi.Request{Method: http.MethodGet, Path: "/v1/webhook_endpoints", Status: 429}, seen[2])
}

func TestAdminRoutes(t *testing.T) {
	s := start(t, 1000, nil)
	body := fmt.Sprintf(`{"id":"evt_1","object":"event","type":"payment_intent.succeeded","created":%d,"data":{"object":{"id":"pi_1"}}}`, now.Unix()-60)
	for range 2 {
		resp, err := http.Post(s.URL()+"/_fake/deliveries", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
	}
	resp, err := http.Post(s.URL()+"/_fake/deliveries", "application/json", strings.NewReader(`{"id":"evt_2"}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "an event needs type and created")
	_, doc := call(t, s, http.MethodGet, "/v1/events", key, nil, nil)
	require.Len(t, doc["data"], 1, "an event id is stored once")
	assert.Equal(t, "evt_1", doc["data"].([]any)[0].(map[string]any)["id"])

	_, created := call(t, s, http.MethodPost, "/v1/webhook_endpoints", key, url.Values{"url": {"https://l.example.com"}, "enabled_events[]": {"*"}}, nil)
	resp, err = http.Post(s.URL()+"/_fake/subscriptions/"+created["id"].(string)+"/disable", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, "disabled", s.Endpoints()[0].Status)
	assert.Equal(t, 2, s.Requests(), "admin routes are not API requests")
}
