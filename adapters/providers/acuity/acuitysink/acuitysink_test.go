package acuitysink_test

import (
	"bytes"
	"context"
	"net/http"
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
