package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/standard"
	"bookingledger/adapters/relay"
)

// alertSink is a real HTTP server that takes alerts and verifies their signature.
type alertSink struct {
	mu     sync.Mutex
	alerts []relay.AlertMessage
	bad    []string
	srv    *httptest.Server
}

func newAlertSink(t *testing.T, secret string) *alertSink {
	t.Helper()
	v, err := standard.New(providers.NewSecrets(secret), 0)
	require.NoError(t, err)
	s := &alertSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, err := v.Verify(r.Header, body, time.Now()); err != nil {
			s.bad = append(s.bad, err.Error())
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var m relay.AlertMessage
		if err := json.Unmarshal(body, &m); err != nil {
			s.bad = append(s.bad, err.Error())
		}
		s.alerts = append(s.alerts, m)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *alertSink) got() []relay.AlertMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]relay.AlertMessage(nil), s.alerts...)
}

// 20 consecutive failures of an endpoint alert at 1, 5 and 20, once each; the success that follows
// sends one recovery notice.
func TestAlertsAtOneFiveAndTwentyFailuresThenOneRecovery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alertSecret := relay.NewSecret()
	sink := newAlertSink(t, alertSecret)
	schedule := make([]time.Duration, 30)
	for i := 1; i < len(schedule); i++ {
		schedule[i] = 20 * time.Millisecond
	}
	r := e.startRelay(t, relayOpts{schedule: schedule, alerts: relay.AlertConfig{URL: sink.srv.URL, Secret: alertSecret}})
	ctx := context.Background()
	rc := newReceiver(t)
	rc.setAnswer(func(n int) int {
		if n <= 20 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	ep := rc.endpointOn(t, r)
	e.record(t, "alert", e.scheduled("calendly-alert", 9))

	eventually(t, 60*time.Second, "the delivery to succeed", func() bool {
		return len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) == 1
	})
	eventually(t, 30*time.Second, "four alerts sent", func() bool { return len(sink.got()) >= 4 })
	time.Sleep(300 * time.Millisecond)
	got := sink.got()
	require.Len(t, got, 4)
	var seen []string
	for _, a := range got {
		seen = append(seen, fmt.Sprintf("%s/%d", a.Type, a.Data.ConsecutiveFailures))
		assert.Equal(t, ep.ID, a.Data.Endpoint)
		assert.Equal(t, rc.srv.Listener.Addr().String(), a.Data.URL, "the host only: the path may hold the receiver's token")
	}
	assert.ElementsMatch(t, []string{"endpoint.failing/1", "endpoint.failing/5", "endpoint.failing/20",
		"endpoint.recovered/20"}, seen)
	alerts, err := r.Alerts(ctx, ep.ID)
	require.NoError(t, err)
	require.Len(t, alerts, 4)
	for _, a := range alerts {
		assert.False(t, a.SentAt.IsZero(), "alert %d marked sent", a.ID)
	}
	assert.Equal(t, []string{"failing", "failing", "failing", "recovered"},
		[]string{alerts[0].Kind, alerts[1].Kind, alerts[2].Kind, alerts[3].Kind})
	_, attempts, err := r.DeliveryWithAttempts(ctx, deliveriesIn(t, r, ep.ID, "")[0].ID)
	require.NoError(t, err)
	require.Len(t, attempts, 21)
	assert.Equal(t, http.StatusInternalServerError, attempts[0].Status)
	assert.Contains(t, attempts[0].Response, "failing on purpose")
	got2, err := r.Endpoint(ctx, ep.ID)
	require.NoError(t, err)
	assert.Zero(t, got2.ConsecutiveFailures)

	// A new streak alerts again from 1.
	rc.setAnswer(func(int) int { return http.StatusBadGateway })
	e.record(t, "alert-2", e.canceled("calendly-alert"))
	// At least five: the new streak goes on failing and alerts again at 5 soon after (a wait for
	// exactly five could miss it under load, as one clean-clone CI run did).
	eventually(t, 30*time.Second, "the new streak's first alert", func() bool { return len(sink.got()) >= 5 })
	next := sink.got()[4]
	assert.Equal(t, "endpoint.failing", next.Type)
	assert.Equal(t, 1, next.Data.ConsecutiveFailures)
}

// A 410 disables the endpoint: nothing more is sent, later events wait as paused deliveries, and
// enable sends them all.
func TestGoneDisablesTheEndpointUntilEnabled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{})
	ctx := context.Background()
	rc := newReceiver(t)
	rc.setAnswer(func(int) int { return http.StatusGone })
	ep := rc.endpointOn(t, r)
	e.record(t, "gone-1", e.scheduled("calendly-gone", 9))
	eventually(t, 30*time.Second, "the endpoint to be disabled", func() bool {
		got, err := r.Endpoint(ctx, ep.ID)
		require.NoError(t, err)
		return got.Disabled
	})
	got, err := r.Endpoint(ctx, ep.ID)
	require.NoError(t, err)
	assert.Contains(t, got.DisabledReason, "410")
	e.record(t, "gone-2", e.canceled("calendly-gone"))
	e.record(t, "gone-3", e.scheduled("calendly-gone-b", 10))
	eventually(t, 30*time.Second, "three paused deliveries", func() bool {
		return len(deliveriesIn(t, r, ep.ID, relay.StatePaused)) == 3
	})
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, 1, rc.requestCount(), "nothing is sent to a disabled endpoint")

	rc.setAnswer(nil)
	_, resumed, err := r.EnableEndpoint(ctx, ep.ID)
	require.NoError(t, err)
	assert.Equal(t, 3, resumed)
	eventually(t, 30*time.Second, "all three delivered", func() bool {
		return len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) == 3
	})
	assert.Len(t, rc.ids(), 3)
	assert.Empty(t, rc.invalidMessages())
}

// 429 and 503 with Retry-After wait at least that long, however short the schedule; the last attempt
// of the schedule leaves the delivery dead and listed.
func TestRetryAfterIsHonouredAndTheLastFailureIsDead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0, 10 * time.Millisecond, 10 * time.Millisecond}})
	ctx := context.Background()
	var (
		mu    sync.Mutex
		times []time.Time
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		n := len(times)
		mu.Unlock()
		if n == 1 {
			// 3 s: far beyond the schedule's 10 ms, so that the next wait, the schedule's, is told
			// from it however slowly tests beside this one let the retry go.
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	ep, _, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: srv.URL})
	require.NoError(t, err)
	e.record(t, "ra", e.scheduled("calendly-ra", 9))
	eventually(t, 30*time.Second, "the delivery to be dead", func() bool {
		return len(deliveriesIn(t, r, ep.ID, relay.StateDead)) == 1
	})
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, times, 3)
	assert.GreaterOrEqual(t, times[1].Sub(times[0]), 2950*time.Millisecond, "Retry-After: 3 was honoured")
	assert.Less(t, times[2].Sub(times[1]), 2900*time.Millisecond, "without Retry-After the schedule applies")
	dead := deliveriesIn(t, r, ep.ID, relay.StateDead)[0]
	assert.Equal(t, 3, dead.Attempts)
	assert.Equal(t, http.StatusServiceUnavailable, dead.LastStatus)
	assert.False(t, dead.CompletedAt.IsZero())
}

// Many deliveries to one endpoint failing and then succeeding at once: a success locks the endpoint
// only to end a streak, so concurrent successes end each streak once — every streak that alerted at
// 1 sends exactly one recovery notice, and the endpoint ends with no streak.
func TestConcurrentAttemptsEndEachFailureStreakOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alertSecret := relay.NewSecret()
	sink := newAlertSink(t, alertSecret)
	schedule := make([]time.Duration, 400) // never dead within the test
	for i := 1; i < len(schedule); i++ {
		schedule[i] = 20 * time.Millisecond
	}
	r := e.startRelay(t, relayOpts{schedule: schedule, workers: 16, alerts: relay.AlertConfig{URL: sink.srv.URL, Secret: alertSecret}})
	ctx := context.Background()
	rc := newReceiver(t)
	var mu sync.Mutex
	down := true
	rc.setAnswer(func(int) int {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	ep := rc.endpointOn(t, r)
	const n = 24
	e.recordCreates(t, "calendly-streak", n, 24)
	eventually(t, 60*time.Second, "the 20-failure alert", func() bool {
		alerts, err := r.Alerts(ctx, ep.ID)
		require.NoError(t, err)
		for _, a := range alerts {
			if a.Kind == "failing" && a.Failures == 20 {
				return true
			}
		}
		return false
	})
	mu.Lock()
	down = false
	mu.Unlock()
	eventually(t, 60*time.Second, "every delivery to succeed", func() bool {
		return len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) == n
	})
	got, err := r.Endpoint(ctx, ep.ID)
	require.NoError(t, err)
	assert.Zero(t, got.ConsecutiveFailures)
	alerts, err := r.Alerts(ctx, ep.ID)
	require.NoError(t, err)
	var streaks, recoveries int
	for _, a := range alerts {
		switch {
		case a.Kind == "recovered":
			recoveries++
		case a.Kind == "failing" && a.Failures == 1:
			streaks++
		}
	}
	assert.GreaterOrEqual(t, streaks, 1)
	assert.Equal(t, streaks, recoveries, "one recovery per streak: %+v", alerts)
	for id, k := range rc.ids() {
		assert.Equal(t, 1, k, "webhook-id %s accepted once", id)
	}
	assert.Len(t, rc.ids(), n)
}

// A job's round of attempts counts the endpoint's streak in the order the answers came: a failure
// answered before a success of the same round is ended by it (and its alert is followed by a
// recovery), as it would be across rounds.
func TestASuccessEndsTheStreakOfAFailureAnsweredBeforeItInOneRound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{noProjection: true, schedule: []time.Duration{0}})
	ctx := context.Background()
	rc := newReceiver(t)
	failing := relay.WebhookID(e.eid("calendly-order-fail", "scheduled"))
	failed := make(chan struct{})
	rc.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("webhook-id") == failing {
			w.WriteHeader(http.StatusInternalServerError)
			close(failed)
			return
		}
		<-failed
		time.Sleep(300 * time.Millisecond) // this answer ends after the failure's, however slow the machine
		rc.serve(w, req)
	})
	ep := rc.endpointOn(t, r)
	// One delivery, so one transaction: once the log returns both events (below the oldest transaction
	// running anywhere in the cluster, waitForLog) the projection's catch-up reads them in one batch and
	// plans both in one job. Started before, it could find the log empty and get them one at a time
	// from its subscription.
	e.record(t, "order", e.scheduled("calendly-order-fail", 9), e.scheduled("calendly-order-ok", 10))
	e.waitForLog(t, 2)
	e.startRelay(t, relayOpts{schedule: []time.Duration{0}})
	eventually(t, 30*time.Second, "one delivery dead and one succeeded", func() bool {
		return len(deliveriesIn(t, r, ep.ID, relay.StateDead)) == 1 && len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) == 1
	})
	var most int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT coalesce(max(jsonb_array_length(args->'delivery_ids')), 1) FROM river_job
WHERE kind = 'bookingledger.relay_deliver'`).Scan(&most))
	require.Equal(t, 2, most, "both deliveries were attempted by one job")
	got, err := r.Endpoint(ctx, ep.ID)
	require.NoError(t, err)
	assert.Zero(t, got.ConsecutiveFailures, "the later success ended the streak")
	alerts, err := r.Alerts(ctx, ep.ID)
	require.NoError(t, err)
	var kinds []string
	for _, a := range alerts {
		kinds = append(kinds, a.Kind)
	}
	assert.Equal(t, []string{relay.AlertFailing, relay.AlertRecovered}, kinds)
}

// With BOOKINGLEDGER_ALERT_FORMAT=slack an alert is a Slack-compatible {"text": …} naming the
// endpoint by host and the length of its streak.
func TestSlackAlertsAreOneLineOfText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var (
		mu    sync.Mutex
		texts []map[string]any
	)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		err := json.NewDecoder(r.Body).Decode(&m)
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			texts = append(texts, m)
		}
	}))
	t.Cleanup(sink.Close)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0}, alerts: relay.AlertConfig{URL: sink.URL, Format: relay.AlertFormatSlack}})
	ctx := context.Background()
	rc := newReceiver(t)
	rc.setAnswer(func(int) int { return http.StatusInternalServerError })
	ep, _, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url()})
	require.NoError(t, err)
	e.record(t, "slack", e.scheduled("calendly-slack", 9))
	// Its one attempt failed: the streak's alert, and the delivery is dead (schedule of one).
	eventually(t, 30*time.Second, "the alerts", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(texts) == 2
	})
	want := fmt.Sprintf("bookingledger relay: endpoint %d (%s) failed 1 time(s) in a row", ep.ID, rc.srv.Listener.Addr())
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, texts, map[string]any{"text": want})
	for _, m := range texts {
		assert.Len(t, m, 1, "text alone")
		if m["text"] != want {
			assert.Contains(t, m["text"], fmt.Sprintf("to endpoint %d (%s) is dead after 1 attempt(s): HTTP 500", ep.ID, rc.srv.Listener.Addr()))
		}
	}
}
