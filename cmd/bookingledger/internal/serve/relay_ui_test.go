package serve

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/relay"
)

// TestEndpointPageShowsThrottleBreakerBacklogAndSendsMissed: an ordered, throttled endpoint that the
// relay disabled with its breaker open shows its settings, breaker, backlog and paused count; its
// "Enable and send missed" enables it and resumes every paused delivery, as the CLI's --send-missed.
func TestEndpointPageShowsThrottleBreakerBacklogAndSendsMissed(t *testing.T) {
	f := newAdminFixture(t, 1<<20)
	ctx := context.Background()
	yes, rate, conc := true, 50.0, 3
	ep, _, err := f.relay.AddEndpoint(ctx, relay.NewEndpoint{URL: "https://1.1.1.1/hook",
		Options: relay.SettingsUpdate{Ordered: &yes, RatePerSecond: &rate, Concurrency: &conc}})
	require.NoError(t, err)
	insert := func(version int, state, held string) {
		var h any
		if held != "" {
			h = held
		}
		_, err := f.pool.Exec(ctx, `INSERT INTO relay_deliveries (endpoint_id, event_id, booking, stream, stream_version, event_type,
    recorded_at, state, held) VALUES ($1, $2, 'calendly-b', 'booking-calendly-b', $3, 'booking.scheduled.v1', now(), $4, $5)`,
			ep.ID, uuid.New(), version, state, h)
		require.NoError(t, err)
	}
	insert(1, relay.StatePending, "")
	insert(2, relay.StatePending, "breaker")
	for v := 3; v <= 5; v++ {
		insert(v, relay.StatePaused, "")
	}
	_, err = f.pool.Exec(ctx, `UPDATE relay_endpoints SET consecutive_failures = 7, failing_since = now() - interval '6 days',
    disabled_at = now(), disabled_reason = 'failing for longer than 120h0m0s', auto_disabled = true WHERE id = $1`, ep.ID)
	require.NoError(t, err)

	admin, _ := f.signIn(t, f.tok["admin"], "")
	require.NotNil(t, admin)
	page := fmt.Sprintf("/ui/admin/endpoints/%d", ep.ID)
	status, body := f.page(t, http.MethodGet, page, admin, nil)
	require.Equal(t, http.StatusOK, status, body)
	for _, want := range []string{"ordered: each booking", "50 attempt(s)/s", "3 in flight per instance", `data-breaker="open"`,
		"opens at 5 consecutive failures", "2 pending", "1 behind the breaker", "3 paused", "Enable and send missed (3)"} {
		assert.Contains(t, body, want)
	}

	status, _ = f.page(t, http.MethodPost, page+"/enable", admin, nil)
	require.Equal(t, http.StatusSeeOther, status)
	got, err := f.relay.Endpoint(ctx, ep.ID)
	require.NoError(t, err)
	assert.False(t, got.Disabled)
	assert.False(t, got.BreakerOpen())
	ds, err := f.relay.Deliveries(ctx, relay.DeliveryQuery{EndpointID: ep.ID, State: relay.StatePending})
	require.NoError(t, err)
	assert.Len(t, ds, 5, "the paused and the held deliveries are on their way")
	status, body = f.page(t, http.MethodGet, page+"?enabled=4", admin, nil)
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "4 delivery(ies) sent again")
	assert.Contains(t, body, `data-breaker="closed"`)
	assert.Contains(t, body, "0 paused")
	assert.NotContains(t, body, "Enable and send missed", "nothing left to send")
}
