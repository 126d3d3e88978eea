package acuitysink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/acuity"
	"bookingledger/adapters/providers/acuity/acuitysink"
	"bookingledger/domain/booking"
)

// The sink speaks the API the real provider fetches from: an Acuity provider pointed at it maps a
// notification to a booking on the synthesized slot, and to a cancel once the state says canceled.
func TestProviderMapsWhatTheSinkAnswers(t *testing.T) {
	var (
		mu      sync.Mutex
		fetches []acuitysink.Fetch
	)
	s, err := acuitysink.Start(acuitysink.Config{OnFetch: func(f acuitysink.Fetch) {
		mu.Lock()
		defer mu.Unlock()
		fetches = append(fetches, f)
	}})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	p, err := acuity.New(acuity.Config{Keys: providers.NewSecrets("dev-key"), UserID: "dev-user", APIURL: s.URL()})
	require.NoError(t, err)

	mapped := func(action string) providers.Mapped {
		t.Helper()
		body := []byte("action=" + action + "&id=123&calendarID=1&appointmentTypeID=9")
		h := http.Header{"X-Acuity-Signature": {acuity.Sign("dev-key", body)}, "Content-Type": {"application/x-www-form-urlencoded"}}
		_, err := p.Verify(h, body, time.Now())
		require.NoError(t, err)
		m, err := p.Map(context.Background(), h, body, time.Now())
		require.NoError(t, err)
		return m
	}
	m := mapped("scheduled")
	require.NotEmpty(t, m.Events)
	_, _, email := acuitysink.Contact(123)
	require.Len(t, m.Contacts, 1, "the invitee e-mail step has an address to write to")
	assert.Equal(t, email, m.Contacts[0].Email)
	assert.Equal(t, "Edsger Backus", m.Contacts[0].Name, "made up from the id: first name 123 mod 8, last name 123/8 mod 8")
	slot := m.Events[0].Payload.(booking.Rescheduled).Slot
	assert.Equal(t, time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), slot.Start, "09:00 + 123 mod 8 hours")
	assert.Equal(t, 30*time.Minute, slot.End.Sub(slot.Start))
	again := mapped("changed")
	assert.Equal(t, m.Events[0].ID, again.Events[0].ID, "the same state maps to the same events: a duplicate")

	req, err := http.NewRequest(http.MethodPut, s.URL()+"/appointments/123",
		bytes.NewBufferString(`{"start":"2026-12-02T12:00:00Z","minutes":30,"calendarID":1,"canceled":true}`))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	canceled := mapped("canceled")
	_, isCancel := canceled.Events[0].Payload.(booking.Canceled)
	assert.True(t, isCancel, "%+v", canceled.Events)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, fetches, 3)
	assert.Equal(t, acuitysink.Fetch{ID: "123", Canceled: true, Start: slot.Start}, fetches[2])
}

func TestSinkRefusesWhatAcuityRefuses(t *testing.T) {
	s, err := acuitysink.Start(acuitysink.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	get := func(path string, auth bool) int {
		req, err := http.NewRequest(http.MethodGet, s.URL()+path, nil)
		require.NoError(t, err)
		if auth {
			req.SetBasicAuth("u", "k")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, get("/appointments/5", true))
	assert.Equal(t, http.StatusUnauthorized, get("/appointments/5", false))
	assert.Equal(t, http.StatusNotFound, get("/appointments/abc", true))
	assert.Equal(t, http.StatusNotFound, get("/appointments/0", true))
}

// do sends a request with basic auth and returns the status and the raw answer.
func do(t *testing.T, method, u, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	require.NoError(t, err)
	req.SetBasicAuth("u", "k")
	if strings.HasPrefix(body, "{") {
		req.Header.Set("Content-Type", "application/json")
	} else if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

func TestListFiltersByDateStateAndMax(t *testing.T) {
	s, err := acuitysink.Start(acuitysink.Config{RatePerSecond: 1000})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	day := func(d int) time.Time { return time.Date(2026, 12, d, 10, 0, 0, 0, time.UTC) }
	for i, d := range []int{1, 2, 2, 3, 5} {
		s.Put(strconv.Itoa(100+i), acuitysink.Appointment{Start: day(d), Minutes: 30, CalendarID: int64(1 + i%2), Canceled: i == 2})
	}
	ids := func(query string) []int64 {
		t.Helper()
		status, body := do(t, http.MethodGet, s.URL()+"/appointments?"+query, "")
		require.Equal(t, http.StatusOK, status, string(body))
		var docs []struct {
			ID    int64  `json:"id"`
			Email string `json:"email"`
		}
		require.NoError(t, json.Unmarshal(body, &docs))
		out := make([]int64, 0, len(docs))
		for _, d := range docs {
			_, _, email := acuitysink.Contact(d.ID)
			assert.Equal(t, email, d.Email, "every appointment has its made-up client")
			out = append(out, d.ID)
		}
		return out
	}
	tests := []struct {
		query string
		want  []int64
	}{
		{"", []int64{104, 103, 101, 100}},
		{"showall=true", []int64{104, 103, 102, 101, 100}},
		{"canceled=true", []int64{102}},
		{"minDate=2026-12-02&maxDate=2026-12-03&showall=true", []int64{103, 102, 101}},
		{"minDate=2026-12-02&maxDate=2026-12-02", []int64{101}},
		{"showall=true&max=2", []int64{104, 103}},
		{"showall=true&max=2&direction=ASC", []int64{100, 101}},
		{"calendarID=2&showall=true", []int64{103, 101}},
		{"minDate=2026-12-06", []int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) { assert.Equal(t, tt.want, ids(tt.query)) })
	}
	status, body := do(t, http.MethodGet, s.URL()+"/appointments?minDate=tomorrow", "")
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, string(body), `"status_code":400`)

	status, _ = do(t, http.MethodPost, s.URL()+"/_fake/deliveries", "action=appointment.canceled&id=104&calendarID=1&appointmentTypeID=9")
	require.Equal(t, http.StatusNoContent, status)
	assert.Equal(t, []int64{104, 102}, ids("canceled=true"), "a delivered cancel is played at the API")
	status, _ = do(t, http.MethodPost, strings.TrimSuffix(s.URL(), "/api/v1")+"/_fake/deliveries", "action=scheduled&id=77")
	require.Equal(t, http.StatusNoContent, status)
	assert.Contains(t, ids("minDate=2026-12-02&maxDate=2026-12-02"), int64(77), "a delivered id is registered (09:00 + 77 mod 8 h)")
}

func TestWebhooksAsAcuityKeepsThem(t *testing.T) {
	s, err := acuitysink.Start(acuitysink.Config{RatePerSecond: 1000})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	status, body := do(t, http.MethodPost, s.URL()+"/webhooks", `{"event":"appointment.scheduled","target":"https://ledger.example.com/webhooks/acuity"}`)
	require.Equal(t, http.StatusOK, status, string(body))
	assert.JSONEq(t, `{"id":1,"event":"appointment.scheduled","target":"https://ledger.example.com/webhooks/acuity","status":"active"}`, string(body))

	for _, bad := range []string{
		`{"event":"appointment.moved","target":"https://ledger.example.com/"}`,
		`{"event":"appointment.changed","target":"https://ledger.example.com:8443/"}`,
		`{"event":"appointment.changed"}`,
	} {
		status, body := do(t, http.MethodPost, s.URL()+"/webhooks", bad)
		assert.Equal(t, http.StatusBadRequest, status, bad)
		assert.Contains(t, string(body), `"status_code":400`)
	}
	for i := 1; i < acuitysink.MaxWebhooks; i++ {
		status, _ := do(t, http.MethodPost, s.URL()+"/webhooks", fmt.Sprintf(`{"event":"appointment.changed","target":"https://h%d.example.com/"}`, i))
		require.Equal(t, http.StatusOK, status)
	}
	status, _ = do(t, http.MethodPost, s.URL()+"/webhooks", `{"event":"appointment.changed","target":"https://h26.example.com/"}`)
	assert.Equal(t, http.StatusBadRequest, status, "25 webhooks at most")

	status, _ = do(t, http.MethodDelete, s.URL()+"/webhooks/1", "")
	assert.Equal(t, http.StatusNoContent, status)
	status, _ = do(t, http.MethodDelete, s.URL()+"/webhooks/1", "")
	assert.Equal(t, http.StatusNotFound, status)
	status, body = do(t, http.MethodGet, s.URL()+"/webhooks", "")
	require.Equal(t, http.StatusOK, status)
	var hooks []map[string]any
	require.NoError(t, json.Unmarshal(body, &hooks))
	assert.Len(t, hooks, acuitysink.MaxWebhooks-1, "a deleted webhook is not listed")
}

func TestBudgetAnswers429(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	s, err := acuitysink.Start(acuitysink.Config{RatePerSecond: 2, Now: func() time.Time { return now }})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	var statuses []int
	for range 3 {
		status, _ := do(t, http.MethodGet, s.URL()+"/appointments/5", "")
		statuses = append(statuses, status)
	}
	assert.Equal(t, []int{200, 200, 429}, statuses)
	assert.Equal(t, 3, s.Requests())
}
