package relay_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/metricstest"
	"bookingledger/adapters/relay"
)

// Only a 2xx answer delivers. Any other status — a 3xx (redirects are not followed), a 4xx, a 5xx —
// and no answer within the attempt's timeout are failed attempts, and with a one-attempt schedule
// the delivery is dead. Each attempt keeps its status (none without an answer) and at most 1 KiB of
// the answer; the message goes out as application/json; the metrics count attempts and finished
// deliveries by outcome, and the dead per endpoint.
func TestOnlyA2xxAnswerDelivers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	// Long enough that a loaded machine, with the package's other tests beside this one, answers the
	// others within it; the silent one still runs out.
	const timeout = 5 * time.Second
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0}, attemptTimeout: timeout, registry: reg})
	ctx := context.Background()

	delivered := []int{http.StatusOK, http.StatusAccepted, 299}
	failed := []int{300, http.StatusNotModified, http.StatusBadRequest, http.StatusNotFound, http.StatusInternalServerError}
	long := strings.Repeat("x", 4096)
	eps := map[int]int64{} // status -> endpoint
	contentTypes := make(chan string, len(delivered))
	for _, status := range append(append([]int{}, delivered...), failed...) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if status/100 == 2 {
				contentTypes <- req.Header.Get("Content-Type")
			}
			w.WriteHeader(status)
			_, _ = w.Write([]byte(long))
		}))
		t.Cleanup(srv.Close)
		ep, _, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: srv.URL})
		require.NoError(t, err)
		eps[status] = ep.ID
	}
	// A receiver that never answers; released when the test ends so that its server can close.
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-req.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(silent.Close)
	t.Cleanup(func() { close(release) })
	quietEp, _, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: silent.URL})
	require.NoError(t, err)
	quiet := quietEp.ID

	e.record(t, "outcome", e.scheduled("calendly-outcome", 9))
	finished := func(ep int64) bool {
		ds := deliveriesIn(t, r, ep, "")
		return len(ds) == 1 && (ds[0].State == relay.StateSucceeded || ds[0].State == relay.StateDead)
	}
	eventually(t, 30*time.Second, "every delivery finished", func() bool {
		for _, ep := range eps {
			if !finished(ep) {
				return false
			}
		}
		return finished(quiet)
	})

	for _, status := range delivered {
		d := deliveriesIn(t, r, eps[status], "")[0]
		assert.Equal(t, relay.StateSucceeded, d.State, "HTTP %d delivers", status)
		assert.Equal(t, status, d.LastStatus)
		assert.Equal(t, "application/json", <-contentTypes)
	}
	for _, status := range failed {
		d, attempts, err := r.DeliveryWithAttempts(ctx, deliveriesIn(t, r, eps[status], "")[0].ID)
		require.NoError(t, err)
		assert.Equal(t, relay.StateDead, d.State, "HTTP %d is a failed attempt", status)
		require.Len(t, attempts, 1)
		assert.False(t, attempts[0].Succeeded)
		assert.Equal(t, status, attempts[0].Status)
		if status != http.StatusNotModified { // a 304 has no body
			assert.Equal(t, long[:1024]+"…", attempts[0].Response, "HTTP %d: the first 1 KiB of the answer is kept", status)
		}
	}
	d, attempts, err := r.DeliveryWithAttempts(ctx, deliveriesIn(t, r, quiet, "")[0].ID)
	require.NoError(t, err)
	assert.Equal(t, relay.StateDead, d.State, "no answer within the timeout is a failed attempt")
	require.Len(t, attempts, 1)
	assert.Zero(t, attempts[0].Status)
	assert.NotEmpty(t, attempts[0].Error)
	assert.Less(t, attempts[0].LatencyMS, float64(10*timeout/time.Millisecond), "the attempt ended at its timeout")

	ep := func(id int64) string { return strconv.FormatInt(id, 10) }
	for _, status := range delivered {
		assert.Equal(t, 1.0, metricstest.Sum(t, reg, "bookingledger_relay_attempts_total", map[string]string{"endpoint": ep(eps[status]), "outcome": "succeeded"}))
		assert.Equal(t, 1.0, metricstest.Sum(t, reg, "bookingledger_relay_deliveries_total", map[string]string{"endpoint": ep(eps[status]), "outcome": "succeeded"}))
		assert.Equal(t, 0.0, metricstest.Sum(t, reg, "bookingledger_relay_deliveries", map[string]string{"endpoint": ep(eps[status]), "state": "dead"}))
	}
	for _, id := range append([]int64{eps[http.StatusInternalServerError], eps[300]}, quiet) {
		assert.Equal(t, 1.0, metricstest.Sum(t, reg, "bookingledger_relay_attempts_total", map[string]string{"endpoint": ep(id), "outcome": "failed"}))
		assert.Equal(t, 1.0, metricstest.Sum(t, reg, "bookingledger_relay_deliveries_total", map[string]string{"endpoint": ep(id), "outcome": "dead"}))
		assert.Equal(t, 1.0, metricstest.Sum(t, reg, "bookingledger_relay_deliveries", map[string]string{"endpoint": ep(id), "state": "dead"}))
	}
}
