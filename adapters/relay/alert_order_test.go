package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/relay"
)

// alertWord is "failing(n)" or "recovered" of an alert.
func alertWord(kind string, failures int) string {
	if kind == relay.AlertRecovered {
		return "recovered"
	}
	return fmt.Sprintf("failing(%d)", failures)
}

// checkStreaks asserts that words are whole streaks in order: failing(1), then failing(5) and
// failing(20) when reached, then one recovered; the last streak may still be open only if open.
func checkStreaks(t *testing.T, words []string, open bool) {
	t.Helper()
	next := 0 // index into the thresholds of the current streak; -1: between streaks
	thresholds := relay.AlertThresholds
	inStreak := false
	for i, w := range words {
		switch {
		case w == "recovered":
			require.True(t, inStreak, "alert %d: a recovery without a streak: %v", i, words)
			inStreak, next = false, 0
		case !inStreak:
			require.Equal(t, alertWord(relay.AlertFailing, thresholds[0]), w, "alert %d: a streak starts at 1: %v", i, words)
			inStreak, next = true, 1
		default:
			require.Less(t, next, len(thresholds), "alert %d: past the last threshold: %v", i, words)
			require.Equal(t, alertWord(relay.AlertFailing, thresholds[next]), w, "alert %d: thresholds in order: %v", i, words)
			next++
		}
	}
	if !open {
		assert.False(t, inStreak, "every streak ended with its recovery: %v", words)
	}
}

// TestFlappingReceiverAlertsInAttemptOrder (issue #36): a receiver that goes down and up again
// several times while 16 workers deliver to it. Rounds of concurrent jobs commit out of attempt
// order; the streak follows the attempts' times, so the alerts are whole streaks — failing(1),
// failing(5), failing(20) as reached, then exactly one recovered — with no failing after a later
// success, the endpoint ends with no failures, and the channel receives them in that order.
func TestFlappingReceiverAlertsInAttemptOrder(t *testing.T) {
	// Not parallel: its bounds are in wall time, which tests beside it on two cores stretch.
	e := newEnv(t)
	alertSecret := relay.NewSecret()
	sink := newAlertSink(t, alertSecret)
	schedule := make([]time.Duration, 400)
	for i := 1; i < len(schedule); i++ {
		schedule[i] = 20 * time.Millisecond
	}
	r := e.startRelay(t, relayOpts{schedule: schedule, workers: 16, alerts: relay.AlertConfig{URL: sink.srv.URL, Secret: alertSecret}})
	ctx := context.Background()
	rc := newReceiver(t)
	var (
		mu    sync.Mutex
		start time.Time // the first request's: the outages are the receiver's, however late it is first called
	)
	rc.setAnswer(func(int) int {
		mu.Lock()
		if start.IsZero() {
			start = time.Now()
		}
		el := time.Since(start)
		mu.Unlock()
		// Three outages of 700 ms, 300 ms apart, then up for good. A request that comes in the first
		// 100 ms of a phase is answered 100 ms into it, so that every answer of a phase ends after
		// every answer of the phase before (the streak follows the answers' times).
		phase := el % time.Second
		if el < 3*time.Second && phase < 700*time.Millisecond {
			if phase < 100*time.Millisecond {
				time.Sleep(100*time.Millisecond - phase)
			}
			return http.StatusServiceUnavailable
		}
		if up := phase - 700*time.Millisecond; el < 3*time.Second+100*time.Millisecond && up >= 0 && up < 100*time.Millisecond {
			time.Sleep(100*time.Millisecond - up)
		}
		return http.StatusNoContent
	})
	ep := rc.endpointOn(t, r)
	// Events keep coming through every outage, so each one is seen by attempts of many jobs at once.
	const n = 64
	for i := range n {
		b := fmt.Sprintf("calendly-flap-%d", i)
		e.record(t, b, e.scheduled(b, i))
		time.Sleep(50 * time.Millisecond)
	}
	eventually(t, 60*time.Second, "every delivery to succeed", func() bool {
		return len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) == n
	})
	got, err := r.Endpoint(ctx, ep.ID)
	require.NoError(t, err)
	assert.Zero(t, got.ConsecutiveFailures)
	alerts, err := r.Alerts(ctx, ep.ID)
	require.NoError(t, err)
	var words []string
	for _, a := range alerts {
		words = append(words, alertWord(a.Kind, a.Failures))
	}
	t.Logf("alerts: %s", strings.Join(words, " "))
	require.NotEmpty(t, words, "the outages alerted")
	checkStreaks(t, words, false)
	// A failure older than a success counts for nothing: no streak without an outage.
	assert.LessOrEqual(t, strings.Count(strings.Join(words, " "), "recovered"), 3, "three outages, at most three streaks")
	eventually(t, 30*time.Second, "every alert sent", func() bool { return len(sink.got()) == len(alerts) })
	var sent []string
	for _, m := range sink.got() {
		kind := strings.TrimPrefix(m.Type, "endpoint.")
		sent = append(sent, alertWord(kind, m.Data.ConsecutiveFailures))
	}
	assert.Equal(t, words, sent, "the channel hears them in order")
}
