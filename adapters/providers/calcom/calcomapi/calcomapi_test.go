package calcomapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers/calcom/calcomapi"
)

const key = "cal_test_fake"

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func call(t *testing.T, method, url string, header map[string]string, body any) answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := answer{status: resp.StatusCode, header: resp.Header}
	if len(raw) > 0 && resp.Header.Get("Content-Type") != "" && raw[0] == '{' {
		require.NoError(t, json.Unmarshal(raw, &a.body), string(raw))
	}
	return a
}

func start(t *testing.T, cfg calcomapi.Config) *calcomapi.Server {
	t.Helper()
	s, err := calcomapi.Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

var authed = map[string]string{"Authorization": "Bearer " + key, "cal-api-version": "2024-08-13"}

func TestBookingsListAnswersAsCalcomDocuments(t *testing.T) {
	s := start(t, calcomapi.Config{Key: key})
	day := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for i := range 3 {
		_, err := s.Add(calcomapi.Booking{UID: "b" + strconv.Itoa(i), Start: day.Add(time.Duration(i) * time.Hour),
			End: day.Add(time.Duration(i)*time.Hour + 30*time.Minute), Host: calcomapi.Person{ID: 7, Email: "h@example.com"}})
		require.NoError(t, err)
	}
	tests := []struct {
		name    string
		query   string
		header  map[string]string
		status  int
		code    string // error.code
		uids    []string
		hasNext bool
	}{
		{"first page", "?take=2&skip=0", authed, 200, "", []string{"b0", "b1"}, true},
		{"last page", "?take=2&skip=2", authed, 200, "", []string{"b2"}, false},
		{"window", "?afterStart=2026-12-01T10:00:00Z&beforeEnd=2026-12-01T10:30:00Z", authed, 200, "", []string{"b1"}, false},
		{"sorted by start, descending", "?sortStart=desc", authed, 200, "", []string{"b2", "b1", "b0"}, false},
		{"take 0", "?take=0", authed, 400, "BadRequestException", nil, false},
		{"take 251", "?take=251", authed, 400, "BadRequestException", nil, false},
		{"no key", "", map[string]string{"cal-api-version": "2024-08-13"}, 401, "UnauthorizedException", nil, false},
		{"not an API key", "", map[string]string{"Authorization": "Bearer " + "abc", "cal-api-version": "2024-08-13"}, 401, "UnauthorizedException", nil, false},
		{"unreadable date", "?afterUpdatedAt=yesterday", authed, 400, "BadRequestException", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := call(t, http.MethodGet, s.URL()+"/bookings"+tt.query, tt.header, nil)
			require.Equal(t, tt.status, a.status)
			if tt.code != "" {
				assert.Equal(t, "error", a.body["status"])
				e, _ := a.body["error"].(map[string]any)
				assert.Equal(t, tt.code, e["code"])
				assert.NotEmpty(t, e["message"])
				return
			}
			assert.Equal(t, "success", a.body["status"])
			data, _ := a.body["data"].([]any)
			var uids []string
			for _, d := range data {
				uids = append(uids, d.(map[string]any)["uid"].(string))
			}
			assert.Equal(t, tt.uids, uids)
			p, _ := a.body["pagination"].(map[string]any)
			assert.Equal(t, tt.hasNext, p["hasNextPage"])
			assert.Equal(t, float64(len(tt.uids)), p["returnedItems"])
		})
	}

	t.Run("without cal-api-version the older shape", func(t *testing.T) {
		a := call(t, http.MethodGet, s.URL()+"/bookings", map[string]string{"Authorization": "Bearer " + key}, nil)
		require.Equal(t, 200, a.status)
		data, ok := a.body["data"].(map[string]any)
		require.True(t, ok, "data is an object, not the list: %v", a.body)
		assert.Len(t, data["bookings"], 3)
	})
	t.Run("one booking, and a missing one", func(t *testing.T) {
		a := call(t, http.MethodGet, s.URL()+"/bookings/b1", authed, nil)
		require.Equal(t, 200, a.status)
		assert.Equal(t, "b1", a.body["data"].(map[string]any)["uid"])
		assert.Equal(t, 404, call(t, http.MethodGet, s.URL()+"/bookings/nope", authed, nil).status)
	})
}

func TestBudgetAnswers429WithItsHeaders(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 20, 0, time.UTC)
	var mu sync.Mutex
	var seen []calcomapi.Request
	s := start(t, calcomapi.Config{Key: key, Now: func() time.Time { return now }, OnRequest: func(r calcomapi.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r)
	}})
	s.SetBudget(2, time.Minute)
	for range 2 {
		require.Equal(t, 200, call(t, http.MethodGet, s.URL()+"/webhooks", authed, nil).status)
	}
	a := call(t, http.MethodGet, s.URL()+"/webhooks", authed, nil)
	require.Equal(t, http.StatusTooManyRequests, a.status)
	assert.Equal(t, "60", a.header.Get("Retry-After"))
	assert.Equal(t, "2", a.header.Get("X-RateLimit-Limit-Default"))
	assert.Equal(t, "0", a.header.Get("X-RateLimit-Remaining-Default"))
	assert.Equal(t, strconv.FormatInt(now.Add(time.Minute).Unix(), 10), a.header.Get("X-RateLimit-Reset-Default"))
	assert.Equal(t, 3, s.Requests())
	now = now.Add(time.Minute)
	assert.Equal(t, 200, call(t, http.MethodGet, s.URL()+"/webhooks", authed, nil).status, "a new window")
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, calcomapi.Request{Method: "GET", Path: "/v2/webhooks", Status: 429}, seen[2])
}

func TestWebhooksCreateGetPatchDelete(t *testing.T) {
	s := start(t, calcomapi.Config{Key: key})
	bad := call(t, http.MethodPost, s.URL()+"/webhooks", authed, map[string]any{"subscriberUrl": "https://x.example/h"})
	assert.Equal(t, 400, bad.status, "triggers and active are required")
	created := call(t, http.MethodPost, s.URL()+"/webhooks", authed, map[string]any{
		"subscriberUrl": "https://x.example/h", "triggers": []string{"BOOKING_CREATED"}, "active": true, "secret": "s3",
	})
	require.Equal(t, 201, created.status)
	id := created.body["data"].(map[string]any)["id"].(string)
	assert.Equal(t, 200, call(t, http.MethodGet, s.URL()+"/webhooks/"+id, authed, nil).status)
	patched := call(t, http.MethodPatch, s.URL()+"/webhooks/"+id, authed, map[string]any{"active": false})
	require.Equal(t, 200, patched.status)
	assert.Equal(t, false, patched.body["data"].(map[string]any)["active"])
	assert.Equal(t, []string{"BOOKING_CREATED"}, s.Webhooks()[0].Triggers, "a partial update keeps the rest")
	assert.Equal(t, 200, call(t, http.MethodDelete, s.URL()+"/webhooks/"+id, authed, nil).status)
	assert.Equal(t, 404, call(t, http.MethodGet, s.URL()+"/webhooks/"+id, authed, nil).status)
	assert.Equal(t, 404, call(t, http.MethodPatch, s.URL()+"/webhooks/"+id, authed, map[string]any{"active": true}).status)
}

func TestAdminRoutesRecordWebhookBodiesAndDisable(t *testing.T) {
	s := start(t, calcomapi.Config{Key: key})
	post := func(path string, body []byte) int {
		t.Helper()
		resp, err := http.Post(s.AdminURL()+path, "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, d := range []struct{ trigger, path string }{
		{"BOOKING_CREATED", "/deliveries"},
		{"BOOKING_RESCHEDULED", "/deliveries/webhooks/calcom"}, // where `send --url <admin URL>/deliveries` posts
	} {
		body, err := sample.Body("calcom", d.trigger, sample.Params{Booking: "demo"})
		require.NoError(t, err)
		require.Equal(t, http.StatusNoContent, post(d.path, body), d.trigger)
	}
	old, ok := s.Booking("demo")
	require.True(t, ok)
	assert.Equal(t, calcomapi.StatusCancelled, old.Status)
	assert.Equal(t, sample.CalcomRescheduledUID("demo"), old.RescheduledToUID)
	moved, ok := s.Booking(sample.CalcomRescheduledUID("demo"))
	require.True(t, ok)
	assert.Equal(t, "demo", moved.RescheduledFromUID)
	assert.Equal(t, "demo@Cal.com", moved.ICSUID)
	assert.Equal(t, http.StatusUnprocessableEntity, post("/deliveries", []byte(`{"triggerEvent":"FORM_SUBMITTED","createdAt":"2026-01-01T00:00:00Z","payload":{}}`)))
	assert.Equal(t, 0, s.Requests(), "admin routes are not API requests")

	created := call(t, http.MethodPost, s.URL()+"/webhooks", authed, map[string]any{
		"subscriberUrl": "https://x.example/h", "triggers": []string{"BOOKING_CREATED"}, "active": true,
	})
	id := created.body["data"].(map[string]any)["id"].(string)
	assert.Equal(t, http.StatusNoContent, post("/subscriptions/"+id+"/disable", nil))
	assert.False(t, s.Webhooks()[0].Active)
	assert.Equal(t, http.StatusNotFound, post("/subscriptions/nope/disable", nil))
}
