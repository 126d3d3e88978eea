package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/relay"
)

// A dry run counts exactly what the real replay then sends: same webhook-ids, attempts marked with
// the replay, filters by type and by failure honoured.
func TestReplayDryRunCountsWhatTheReplaySends(t *testing.T) {
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0}})
	ctx := context.Background()
	rc := newReceiver(t)
	ep, secret, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url()})
	require.NoError(t, err)
	rc.setSecrets(secret)
	from := time.Now().Add(-time.Minute)
	for i := range 6 {
		b := fmt.Sprintf("calendly-replay-%d", i)
		e.record(t, b, e.scheduled(b, 9+i))
		if i < 3 {
			e.record(t, b+"-ns", e.noShow(b))
		}
	}
	eventually(t, 30*time.Second, "9 deliveries", func() bool { return len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) == 9 })
	// Two more fail for good (a one-attempt schedule).
	rc.setAnswer(func(int) int { return http.StatusInternalServerError })
	e.record(t, "replay-c1", e.canceled("calendly-replay-0"))
	e.record(t, "replay-c2", e.canceled("calendly-replay-1"))
	eventually(t, 30*time.Second, "2 dead", func() bool { return len(deliveriesIn(t, r, ep.ID, relay.StateDead)) == 2 })
	rc.setAnswer(nil)
	to := time.Now().Add(time.Minute)
	before := rc.ids()
	for _, d := range deliveriesIn(t, r, ep.ID, relay.StateDead) {
		before[d.WebhookID]++ // never received, but the id it was sent with
	}

	cases := []struct {
		name string
		q    relay.ReplayQuery
		want map[string]int
	}{
		{"only failed", relay.ReplayQuery{EndpointID: ep.ID, From: from, To: to, OnlyFailed: true},
			map[string]int{"booking.canceled.v1": 2}},
		{"by type", relay.ReplayQuery{EndpointID: ep.ID, From: from, To: to, Types: []string{"booking.no_show_*"}},
			map[string]int{"booking.no_show_marked.v1": 3}},
		{"everything", relay.ReplayQuery{EndpointID: ep.ID, From: from, To: to},
			map[string]int{"booking.scheduled.v1": 6, "booking.no_show_marked.v1": 3, "booking.canceled.v1": 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan, err := r.PlanReplay(ctx, c.q)
			require.NoError(t, err)
			byType := map[string]int{}
			total := 0
			for _, tc := range plan.ByType {
				byType[tc.Type] = tc.Count
				total += tc.Count
			}
			assert.Equal(t, c.want, byType)
			assert.Equal(t, total, plan.Total)
			require.NotNil(t, plan.First)
			require.NotNil(t, plan.Last)
			assert.False(t, plan.Last.RecordedAt.Before(plan.First.RecordedAt))

			seen := len(rc.messages())
			rep, started, err := r.StartReplay(ctx, c.q)
			require.NoError(t, err)
			assert.Equal(t, plan.Total, started.Total)
			assert.Equal(t, plan.Total, rep.Total)
			eventually(t, 30*time.Second, "the replay to finish", func() bool {
				st, err := r.ReplayStatus(ctx, rep.ID)
				require.NoError(t, err)
				return st.Done()
			})
			st, err := r.ReplayStatus(ctx, rep.ID)
			require.NoError(t, err)
			assert.Equal(t, plan.Total, st.Succeeded)
			time.Sleep(200 * time.Millisecond)
			sent := rc.messages()[seen:]
			assert.Len(t, sent, plan.Total, "the replay sends what the dry run counted")
			gotTypes := map[string]int{}
			for _, m := range sent {
				gotTypes[m.msg.Type]++
				assert.Contains(t, before, m.id, "a replay reuses the webhook-id")
			}
			assert.Equal(t, c.want, gotTypes)
			var marked int
			require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM relay_attempts WHERE replay_id = $1 AND succeeded`, rep.ID).Scan(&marked))
			assert.Equal(t, plan.Total, marked, "attempts are marked with the replay")
		})
	}
	assert.Empty(t, rc.invalidMessages())

	_, err = r.PlanReplay(ctx, relay.ReplayQuery{EndpointID: ep.ID, From: to, To: from})
	assert.ErrorIs(t, err, relay.ErrInvalid)
	_, err = r.PlanReplay(ctx, relay.ReplayQuery{EndpointID: 999, From: from, To: to})
	assert.ErrorIs(t, err, relay.ErrNotFound)
}

// Two processes' workers share the deliveries: each is sent once, and both did some of the work.
func TestTwoProcessesShareTheWorkWithoutDoubleSends(t *testing.T) {
	e := newEnv(t)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	r := e.startRelay(t, relayOpts{registry: regA})
	e.startRelay(t, relayOpts{registry: regB})
	ctx := context.Background()
	rc := newReceiver(t)
	rc.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		time.Sleep(5 * time.Millisecond) // long enough that one process cannot take everything
		rc.serve(w, req)
	})
	ep, secret, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url()})
	require.NoError(t, err)
	rc.setSecrets(secret)
	const n = 120
	e.recordCreates(t, "calendly-share", n, 12)
	eventually(t, 60*time.Second, "every delivery", func() bool { return len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) == n })
	time.Sleep(300 * time.Millisecond)
	ids := rc.ids()
	assert.Len(t, ids, n)
	for id, c := range ids {
		assert.Equal(t, 1, c, "webhook-id %s sent once", id)
	}
	a, b := attemptsCounted(t, regA), attemptsCounted(t, regB)
	assert.Equal(t, float64(n), a+b)
	assert.Positive(t, a, "process A worked some deliveries")
	assert.Positive(t, b, "process B worked some deliveries")
}

func attemptsCounted(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != "bookingledger_relay_attempts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// Retrying a dead delivery sends that delivery alone again, as a replay of its own with the same
// webhook-id; every other dead delivery of the endpoint, recorded in the same instant or not, stays
// dead, and a delivery that is not dead is refused.
func TestRetryDeliverySendsThatDeadDeliveryAlone(t *testing.T) {
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0}})
	ctx := context.Background()
	rc := newReceiver(t)
	ep, secret, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url()})
	require.NoError(t, err)
	rc.setSecrets(secret)
	rc.setAnswer(func(int) int { return http.StatusInternalServerError })
	// One delivery carries two events (recorded together), another one more.
	e.record(t, "retry-1", e.scheduled("calendly-retry-1", 9), e.noShow("calendly-retry-1"))
	e.record(t, "retry-2", e.scheduled("calendly-retry-2", 10))
	eventually(t, 30*time.Second, "3 dead", func() bool { return len(deliveriesIn(t, r, ep.ID, relay.StateDead)) == 3 })
	rc.setAnswer(nil)
	dead := deliveriesIn(t, r, ep.ID, relay.StateDead)
	target := dead[len(dead)-1] // the oldest: it shares its recorded time with another
	seen := len(rc.messages())

	rep, err := r.RetryDelivery(ctx, target.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Total)
	eventually(t, 30*time.Second, "the retry to finish", func() bool {
		st, err := r.ReplayStatus(ctx, rep.ID)
		require.NoError(t, err)
		return st.Done()
	})
	time.Sleep(200 * time.Millisecond)
	sent := rc.messages()[seen:]
	require.Len(t, sent, 1, "only the retried delivery is sent")
	assert.Equal(t, target.WebhookID, sent[0].id)
	d, attempts, err := r.DeliveryWithAttempts(ctx, target.ID)
	require.NoError(t, err)
	assert.Equal(t, relay.StateSucceeded, d.State)
	require.Len(t, attempts, 2)
	assert.False(t, attempts[0].Succeeded)
	assert.True(t, attempts[1].Succeeded)
	assert.Equal(t, rep.ID, attempts[1].ReplayID, "the attempt is marked with the retry's replay")
	assert.Len(t, deliveriesIn(t, r, ep.ID, relay.StateDead), 2, "the other dead deliveries are left alone")

	_, err = r.RetryDelivery(ctx, target.ID)
	assert.ErrorIs(t, err, relay.ErrInvalid, "a succeeded delivery is not retried")
	_, err = r.RetryDelivery(ctx, 1<<40)
	assert.ErrorIs(t, err, relay.ErrNotFound)
}

// A pending delivery waiting for a later attempt is retried now on request: its waiting job is
// brought forward (no second job), the attempt is marked with the retry's replay, and the delivery
// is done. While an attempt is in flight the request is refused, as it is for a delivery that
// succeeded.
func TestRetryBringsAWaitingDeliveryForward(t *testing.T) {
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0, time.Hour, time.Hour}})
	ctx := context.Background()
	rc := newReceiver(t)
	ep, secret, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url()})
	require.NoError(t, err)
	rc.setSecrets(secret)
	inFlight, release := make(chan struct{}), make(chan struct{})
	rc.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if rc.requestCount() == 0 {
			close(inFlight)
			<-release
		}
		rc.serve(w, req)
	})
	rc.setAnswer(func(n int) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	e.record(t, "wait-1", e.scheduled("calendly-wait-1", 9))
	<-inFlight
	d := deliveriesIn(t, r, ep.ID, relay.StatePending)
	require.Len(t, d, 1)
	_, err = r.RetryDelivery(ctx, d[0].ID)
	assert.ErrorIs(t, err, relay.ErrInvalid, "the delivery is being attempted")
	close(release)
	eventually(t, 30*time.Second, "the first attempt recorded and the next one an hour away", func() bool {
		got, _, err := r.DeliveryWithAttempts(ctx, d[0].ID)
		require.NoError(t, err)
		return got.Attempts == 1 && time.Until(got.NextAttemptAt) > 50*time.Minute
	})
	liveJobs := func() int {
		var n int
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM river_job
WHERE kind = 'bookingledger.relay_deliver' AND state NOT IN ('completed', 'cancelled', 'discarded')`).Scan(&n))
		return n
	}
	eventually(t, 10*time.Second, "one waiting job", func() bool { return liveJobs() == 1 })

	rep, err := r.RetryDelivery(ctx, d[0].ID)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Total)
	eventually(t, 30*time.Second, "the retry to finish", func() bool {
		st, err := r.ReplayStatus(ctx, rep.ID)
		require.NoError(t, err)
		return st.Done() && st.Succeeded == 1
	})
	got, attempts, err := r.DeliveryWithAttempts(ctx, d[0].ID)
	require.NoError(t, err)
	assert.Equal(t, relay.StateSucceeded, got.State)
	require.Len(t, attempts, 2)
	assert.Equal(t, http.StatusInternalServerError, attempts[0].Status)
	assert.True(t, attempts[1].Succeeded)
	assert.Equal(t, rep.ID, attempts[1].ReplayID, "the attempt is marked with the retry's replay")
	eventually(t, 10*time.Second, "no job left", func() bool { return liveJobs() == 0 })
	assert.Equal(t, 2, rc.requestCount(), "sent twice: the failure and the retry")
	_, err = r.RetryDelivery(ctx, d[0].ID)
	assert.ErrorIs(t, err, relay.ErrInvalid, "a succeeded delivery is not retried")
}
