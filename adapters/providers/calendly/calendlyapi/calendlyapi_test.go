package calendlyapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers/calendly/calendlyapi"
)

const token = "fake-token"

func start(t *testing.T, cfg calendlyapi.Config) *calendlyapi.Server {
	t.Helper()
	cfg.Token = token
	s, err := calendlyapi.Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return s
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func call(t *testing.T, s *calendlyapi.Server, method, path, bearer string, body any) answer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.URL()+path, rd)
	require.NoError(t, err)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &a.body), string(raw))
	}
	return a
}

func TestRefusesAsCalendlyDoes(t *testing.T) {
	s := start(t, calendlyapi.Config{Member: true})
	me, org := s.Me()
	tests := []struct {
		name, path, bearer string
		status             int
		title, parameter   string
	}{
		{"no token", "/users/me", "", 401, "Unauthenticated", ""},
		{"wrong token", "/users/me", "other", 401, "Unauthenticated", ""},
		{"count 0", "/scheduled_events?user=" + url.QueryEscape(me) + "&count=0", token, 400, "Invalid Argument", "count"},
		{"count 101", "/scheduled_events?user=" + url.QueryEscape(me) + "&count=101", token, 400, "Invalid Argument", "count"},
		{"no owner", "/scheduled_events", token, 400, "Invalid Argument", "organization"},
		{"member reads the organization", "/scheduled_events?organization=" + url.QueryEscape(org), token, 403, "Permission Denied", ""},
		{"another user alone", "/scheduled_events?user=" + url.QueryEscape("https://api.calendly.com/users/OTHER"), token, 403, "Permission Denied", ""},
		{"subscriptions without scope", "/webhook_subscriptions?organization=" + url.QueryEscape(org), token, 400, "Invalid Argument", "scope"},
		{"unknown event", "/scheduled_events/NOPE/invitees", token, 404, "Resource Not Found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := call(t, s, http.MethodGet, tt.path, tt.bearer, nil)
			assert.Equal(t, tt.status, a.status)
			assert.Equal(t, tt.title, a.body["title"])
			assert.NotEmpty(t, a.body["message"])
			if tt.parameter != "" {
				details, _ := a.body["details"].([]any)
				require.Len(t, details, 1)
				assert.Equal(t, tt.parameter, details[0].(map[string]any)["parameter"])
			}
		})
	}
}

func TestPagesWithCalendlysPaginationObject(t *testing.T) {
	s := start(t, calendlyapi.Config{})
	me, _ := s.Me()
	day := time.Date(2026, 12, 10, 9, 0, 0, 0, time.UTC)
	for i := range 45 {
		at := day.Add(time.Duration(44-i) * time.Hour) // seeded in the reverse of start order
		s.Schedule(calendlyapi.Booking{Start: at, End: at.Add(time.Hour)})
	}
	base := "/scheduled_events?user=" + url.QueryEscape(me)

	first := call(t, s, http.MethodGet, base, token, nil)
	require.Equal(t, http.StatusOK, first.status)
	assert.Len(t, first.body["collection"], 20, "count defaults to 20")
	p := first.body["pagination"].(map[string]any)
	assert.InDelta(t, 20, p["count"], 0)
	assert.Nil(t, p["previous_page"])
	assert.Nil(t, p["previous_page_token"])
	next := p["next_page_token"].(string)
	assert.Contains(t, p["next_page"], "page_token="+next)

	var starts []string
	for path := base + "&count=30"; path != ""; {
		a := call(t, s, http.MethodGet, path, token, nil)
		require.Equal(t, http.StatusOK, a.status)
		for _, e := range a.body["collection"].([]any) {
			starts = append(starts, e.(map[string]any)["start_time"].(string))
		}
		path = ""
		if next, _ := a.body["pagination"].(map[string]any)["next_page_token"].(string); next != "" {
			path = base + "&count=30&page_token=" + url.QueryEscape(next)
		}
	}
	require.Len(t, starts, 45)
	assert.IsIncreasing(t, starts, "sorted by start_time:asc")

	window := base + "&min_start_time=" + url.QueryEscape(calendlyapi.Format(day.Add(10*time.Hour))) +
		"&max_start_time=" + url.QueryEscape(calendlyapi.Format(day.Add(20*time.Hour))) + "&count=100"
	assert.Len(t, call(t, s, http.MethodGet, window, token, nil).body["collection"], 10, "start in [10 h, 20 h)")
}

func TestBudgetExceededIs429WithTheRateLimitHeaders(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	s := start(t, calendlyapi.Config{Budget: 2, Window: time.Minute, Now: clock})

	assert.Equal(t, "1", call(t, s, http.MethodGet, "/users/me", token, nil).header.Get("X-RateLimit-Remaining"))
	mu.Lock()
	now = now.Add(15 * time.Second)
	mu.Unlock()
	assert.Equal(t, http.StatusOK, call(t, s, http.MethodGet, "/users/me", token, nil).status)
	refused := call(t, s, http.MethodGet, "/users/me", token, nil)
	assert.Equal(t, http.StatusTooManyRequests, refused.status)
	assert.Equal(t, "2", refused.header.Get("X-RateLimit-Limit"))
	assert.Equal(t, "0", refused.header.Get("X-RateLimit-Remaining"))
	assert.Equal(t, "45", refused.header.Get("X-RateLimit-Reset"), "seconds until the window ends")
	mu.Lock()
	now = now.Add(45 * time.Second)
	mu.Unlock()
	assert.Equal(t, http.StatusOK, call(t, s, http.MethodGet, "/users/me", token, nil).status)
	assert.Equal(t, 4, s.Requests())
}

func TestWebhookSubscriptions(t *testing.T) {
	s := start(t, calendlyapi.Config{})
	me, org := s.Me()
	create := map[string]any{"url": "https://example.com/hook", "events": []string{"invitee.created"},
		"organization": org, "scope": "user", "user": me, "signing_key": "k"}

	created := call(t, s, http.MethodPost, "/webhook_subscriptions", token, create)
	require.Equal(t, http.StatusCreated, created.status)
	sub := created.body["resource"].(map[string]any)
	assert.Equal(t, "https://example.com/hook", sub["callback_url"])
	assert.Equal(t, "active", sub["state"])
	assert.NotContains(t, sub, "signing_key", "write-only")
	assert.Equal(t, http.StatusConflict, call(t, s, http.MethodPost, "/webhook_subscriptions", token, create).status)

	uuid := sub["uri"].(string)[len("https://api.calendly.com/webhook_subscriptions/"):]
	resp, err := http.Post(s.URL()+"/_fake/subscriptions/"+uuid+"/disable", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	got := call(t, s, http.MethodGet, "/webhook_subscriptions/"+uuid, token, nil)
	assert.Equal(t, "disabled", got.body["resource"].(map[string]any)["state"])
	assert.NotNil(t, got.body["resource"].(map[string]any)["retry_started_at"])

	list := "/webhook_subscriptions?organization=" + url.QueryEscape(org) + "&scope=user&user=" + url.QueryEscape(me)
	assert.Len(t, call(t, s, http.MethodGet, list, token, nil).body["collection"], 1)
	assert.Empty(t, call(t, s, http.MethodGet, "/webhook_subscriptions?organization="+url.QueryEscape(org)+"&scope=organization", token, nil).body["collection"])
	assert.Equal(t, http.StatusNoContent, call(t, s, http.MethodDelete, "/webhook_subscriptions/"+uuid, token, nil).status)
	assert.Equal(t, http.StatusNotFound, call(t, s, http.MethodDelete, "/webhook_subscriptions/"+uuid, token, nil).status)
	assert.Empty(t, call(t, s, http.MethodGet, list, token, nil).body["collection"])
}

func TestSeededRescheduleAndNoShowReadAsCalendlysInvitees(t *testing.T) {
	s := start(t, calendlyapi.Config{})
	at := time.Date(2026, 12, 10, 9, 0, 0, 0, time.UTC)
	booked := s.Schedule(calendlyapi.Booking{Start: at, End: at.Add(30 * time.Minute), Name: "Ada", Email: "ada@example.com"})
	old, moved, err := s.Reschedule(booked.URI, at.Add(time.Hour), at.Add(90*time.Minute), time.Time{})
	require.NoError(t, err)
	_, err = s.MarkNoShow(moved.URI, time.Time{})
	require.NoError(t, err)
	_, err = s.Cancel(old.URI, "host", "", time.Time{})
	assert.ErrorIs(t, err, calendlyapi.ErrUnknown, "a canceled invitee cannot be canceled again")

	invitees := func(eventURI string) []any {
		a := call(t, s, http.MethodGet, eventURI[len("https://api.calendly.com"):]+"/invitees", token, nil)
		require.Equal(t, http.StatusOK, a.status)
		return a.body["collection"].([]any)
	}
	o := invitees(old.Event)
	require.Len(t, o, 1, "canceled invitees are listed")
	oi := o[0].(map[string]any)
	assert.Equal(t, "canceled", oi["status"])
	assert.Equal(t, true, oi["rescheduled"])
	assert.Equal(t, moved.URI, oi["new_invitee"])
	assert.Equal(t, "invitee", oi["cancellation"].(map[string]any)["canceler_type"])
	n := invitees(moved.Event)[0].(map[string]any)
	assert.Equal(t, old.URI, n["old_invitee"])
	assert.NotNil(t, n["no_show"])
	ev, ok := s.Event(old.Event)
	require.True(t, ok)
	assert.Equal(t, "canceled", ev.Status, "a one-to-one event is canceled with its invitee")
}

func TestFiltersByStatusAndSorts(t *testing.T) {
	s := start(t, calendlyapi.Config{})
	me, org := s.Me()
	at := time.Date(2026, 12, 10, 9, 0, 0, 0, time.UTC)
	first := s.Schedule(calendlyapi.Booking{Start: at, End: at.Add(time.Hour)})
	second := s.Schedule(calendlyapi.Booking{Start: at.Add(2 * time.Hour), End: at.Add(3 * time.Hour)})
	_, err := s.Cancel(first.URI, "host", "", time.Time{})
	require.NoError(t, err)
	group := s.Schedule(calendlyapi.Booking{Start: at.Add(4 * time.Hour), End: at.Add(5 * time.Hour), Limit: 5})
	joined, err := s.Join(group.Event, calendlyapi.Booking{})
	require.NoError(t, err)
	_, err = s.Cancel(group.URI, "invitee", "", time.Time{})
	require.NoError(t, err)

	uris := func(path string) []string {
		a := call(t, s, http.MethodGet, path, token, nil)
		require.Equal(t, http.StatusOK, a.status, a.body)
		var out []string
		for _, e := range a.body["collection"].([]any) {
			out = append(out, e.(map[string]any)["uri"].(string))
		}
		return out
	}
	events := "/scheduled_events?organization=" + url.QueryEscape(org) + "&user=" + url.QueryEscape(me)
	invitees := group.Event[len(calendlyapi.DefaultURIBase):] + "/invitees"
	tests := []struct {
		name, path string
		want       []string
	}{
		{"both statuses by default", events, []string{first.Event, second.Event, group.Event}},
		{"canceled", events + "&status=canceled", []string{first.Event}},
		{"active, latest first", events + "&status=active&sort=start_time:desc", []string{group.Event, second.Event}},
		{"invitees of both statuses", invitees, []string{group.URI, joined.URI}},
		{"active invitees", invitees + "?status=active", []string{joined.URI}},
		{"invitees newest first", invitees + "?sort=created_at:desc", []string{joined.URI, group.URI}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, uris(tt.path))
		})
	}
	assert.Equal(t, http.StatusBadRequest, call(t, s, http.MethodGet, invitees+"?count=101", token, nil).status)
	assert.Equal(t, http.StatusBadRequest, call(t, s, http.MethodGet, events+"&status=gone", token, nil).status)
}

func TestDisableAllSubscriptions(t *testing.T) {
	s := start(t, calendlyapi.Config{})
	me, org := s.Me()
	for _, u := range []string{"https://example.com/a", "https://example.com/b"} {
		created := call(t, s, http.MethodPost, "/webhook_subscriptions", token, map[string]any{"url": u, "events": []string{"invitee.created"},
			"organization": org, "scope": "user", "user": me})
		require.Equal(t, http.StatusCreated, created.status)
	}
	resp, err := http.Post(s.URL()+"/_fake/subscriptions/all/disable", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	for _, sub := range s.Subscriptions() {
		assert.Equal(t, "disabled", sub.State, sub.URI)
	}
}
