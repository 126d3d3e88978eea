package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/providers/standard"
)

// standardMessage signs a Standard Webhooks message of the payload convention.
func (ts *testServer) standardMessage(t *testing.T, id string, m standard.Message) (http.Header, []byte) {
	t.Helper()
	body, err := json.Marshal(m)
	require.NoError(t, err)
	h, err := standard.Headers(standardSecret, id, ts.Clock.Now(), body)
	require.NoError(t, err)
	return h, body
}

// A create whose provider time is after the booking's cancel is kept and refused (canceled is
// terminal). The delivery is accepted, and the answer, a warning and a metric say it changed nothing.
func TestRefusedEventIsAnsweredLoggedAndCounted(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	h, body := ts.standardMessage(t, "msg_cancel", standard.Message{
		Type: standard.TypeCanceled, Timestamp: at.Format(time.RFC3339),
		Data: standard.Data{Booking: "refused", Reason: "Grace Hopper is unwell"}})
	cancel := ts.post(t, "standard", h, body)
	require.Equal(t, http.StatusOK, cancel.Status, "%s", cancel.Body)
	_, named := cancel.JSON(t)["finding"]
	assert.False(t, named, "the cancel applied: no finding")

	h, body = ts.standardMessage(t, "msg_create", standard.Message{
		Type: standard.TypeScheduled, Timestamp: at.Add(time.Hour).Format(time.RFC3339),
		Data: standard.Data{Booking: "refused", Resources: []string{"rooms.example.com/staff/7"},
			Start: "2026-03-10T10:00:00Z", End: "2026-03-10T11:00:00Z"}})
	create := ts.post(t, "standard", h, body)
	require.Equal(t, http.StatusOK, create.Status, "%s", create.Body)
	answer := create.JSON(t)
	assert.Equal(t, "accepted", answer["status"], "kept in the stream")
	assert.Equal(t, "after_terminal", answer["finding"])
	assert.Contains(t, answer["reason"], "booking was already canceled")
	assert.Equal(t, 2, ts.events(t))
	assert.Equal(t, 1.0, ts.metric(t, httpapi.MetricFindings, map[string]string{"provider": "standard", "finding": "after_terminal"}))

	var warned map[string]any
	for line := range strings.SplitSeq(ts.Logs.String(), "\n") {
		if strings.Contains(line, `"finding":"after_terminal"`) {
			require.NoError(t, json.Unmarshal([]byte(line), &warned))
		}
	}
	require.NotNil(t, warned, "a log line names the finding:\n%s", ts.Logs.String())
	assert.Equal(t, "WARN", warned["level"])
	assert.Equal(t, "standard-refused", warned["booking"])
	assert.Contains(t, warned["reason"], "ignored: booking was already canceled")
	assert.NotContains(t, ts.Logs.String(), "Grace Hopper", "no personal data in logs")

	// A retry of the refused create is a plain duplicate: the refusal was reported once.
	ts.Clock.Advance(time.Minute)
	h, body = ts.standardMessage(t, "msg_create", standard.Message{
		Type: standard.TypeScheduled, Timestamp: at.Add(time.Hour).Format(time.RFC3339),
		Data: standard.Data{Booking: "refused", Resources: []string{"rooms.example.com/staff/7"},
			Start: "2026-03-10T10:00:00Z", End: "2026-03-10T11:00:00Z"}})
	again := ts.post(t, "standard", h, body)
	assert.Equal(t, "duplicate", again.JSON(t)["status"])
	_, named = again.JSON(t)["finding"]
	assert.False(t, named)
	assert.Equal(t, 1.0, ts.metric(t, httpapi.MetricFindings, map[string]string{"provider": "standard", "finding": "after_terminal"}))
}
