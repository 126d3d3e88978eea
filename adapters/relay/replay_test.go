package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/metricstest"
	"bookingledger/adapters/providers/standard"
	"bookingledger/adapters/relay"
	"bookingledger/domain/eventlog"
)

// A dry run counts exactly what the real replay then sends: same webhook-ids, attempts marked with
// the replay, filters by type and by failure honoured.
func TestReplayDryRunCountsWhatTheReplaySends(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0}})
	ctx := context.Background()
	rc := newReceiver(t)
	ep := rc.endpointOn(t, r)
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

			rep, started, sent := replayAndWait(t, r, rc, c.q)
			assert.Equal(t, plan.Total, started.Total)
			assert.Equal(t, plan.Total, rep.Total)
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

	_, err := r.PlanReplay(ctx, relay.ReplayQuery{EndpointID: ep.ID, From: to, To: from})
	assert.ErrorIs(t, err, relay.ErrInvalid)
	_, err = r.PlanReplay(ctx, relay.ReplayQuery{EndpointID: 999, From: from, To: to})
	assert.ErrorIs(t, err, relay.ErrNotFound)
}

// Two processes' workers share the deliveries: each is sent once, and both did some of the work.
func TestTwoProcessesShareTheWorkWithoutDoubleSends(t *testing.T) {
	t.Parallel()
	const workers = 4
	e := newEnv(t)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	r := e.startRelay(t, relayOpts{registry: regA, workers: workers})
	e.startRelay(t, relayOpts{registry: regB, workers: workers})
	rc := newReceiver(t)
	// Each process runs 4 workers, so it has at most 4 attempts in flight. The receiver holds every
	// attempt until 5 are in flight at once, which only both processes together can reach: process B
	// then works some deliveries however the scheduler favours A (up to 10 s, then the test fails).
	var inFlight atomic.Int32
	both := make(chan struct{})
	var once sync.Once
	rc.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if inFlight.Add(1) > workers {
			once.Do(func() { close(both) })
		}
		select {
		case <-both:
		case <-time.After(10 * time.Second):
		}
		inFlight.Add(-1)
		rc.serve(w, req)
	})
	ep := rc.endpointOn(t, r)
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
	return metricstest.Sum(t, reg, "bookingledger_relay_attempts_total", nil)
}

// Retrying a dead delivery sends that delivery alone again, as a replay of its own with the same
// webhook-id; every other dead delivery of the endpoint, recorded in the same instant or not, stays
// dead, and a delivery that is not dead is refused.
func TestRetryDeliverySendsThatDeadDeliveryAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0}})
	ctx := context.Background()
	rc := newReceiver(t)
	ep := rc.endpointOn(t, r)
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
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0, time.Hour, time.Hour}})
	ctx := context.Background()
	rc := newReceiver(t)
	ep := rc.endpointOn(t, r)
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
	_, err := r.RetryDelivery(ctx, d[0].ID)
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

// replayAndWait starts a replay of q, waits until every delivery of it finished, and returns what it
// started with and the messages the receiver got meanwhile.
func replayAndWait(t *testing.T, r *relay.Relay, rc *receiver, q relay.ReplayQuery) (relay.Replay, relay.ReplayPlan, []received) {
	t.Helper()
	ctx := context.Background()
	seen := len(rc.messages())
	rep, plan, err := r.StartReplay(ctx, q)
	require.NoError(t, err)
	eventually(t, 30*time.Second, "the replay to finish", func() bool {
		st, err := r.ReplayStatus(ctx, rep.ID)
		require.NoError(t, err)
		return st.Done()
	})
	st, err := r.ReplayStatus(ctx, rep.ID)
	require.NoError(t, err)
	assert.Equal(t, plan.Total, st.Succeeded)
	time.Sleep(200 * time.Millisecond) // nothing more arrives
	return rep, plan, rc.messages()[seen:]
}

func planCounts(p relay.ReplayPlan) map[string]int {
	out := map[string]int{}
	for _, tc := range p.ByType {
		out[tc.Type] = tc.Count
	}
	return out
}

func sentCounts(ms []received) map[string]int {
	out := map[string]int{}
	for _, m := range ms {
		out[m.id]++
	}
	return out
}

// A window replay also sends the window's events that have no delivery of the endpoint (recorded
// before it was added), of the types it and the replay select: it creates their deliveries, with the
// webhook-ids the fan-out gives, once, however often the window is replayed. Its dry run counts them,
// --only-failed leaves them out, and the log is read a page at a time.
func TestReplayBackfillsEventsRecordedBeforeTheEndpoint(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0}, replayPage: 2})
	ctx := context.Background()
	rc := newReceiver(t)

	e.record(t, "bf-old", e.scheduled("calendly-bf-old", 8)) // before the window
	time.Sleep(100 * time.Millisecond)
	from := time.Now()
	time.Sleep(100 * time.Millisecond)
	for i := range 3 {
		b := fmt.Sprintf("calendly-bf-%d", i)
		e.record(t, b, e.scheduled(b, 9+i))
		if i < 2 {
			e.record(t, b+"-ns", e.noShow(b))
		}
	}
	e.record(t, "bf-c", e.canceled("calendly-bf-2")) // a type the endpoint does not take
	ep, secret, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url(), Types: []string{"booking.scheduled.*", "booking.no_show_*"}})
	require.NoError(t, err)
	rc.setSecrets(secret)
	e.record(t, "bf-new", e.scheduled("calendly-bf-new", 13)) // the fan-out's
	eventually(t, 30*time.Second, "the fan-out's delivery", func() bool { return len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) == 1 })
	time.Sleep(100 * time.Millisecond)
	to := time.Now().Add(time.Minute)
	require.Len(t, rc.messages(), 1)
	rows := func() []relay.Delivery { return deliveriesIn(t, r, ep.ID, "") }
	id := func(b, kind string) string { return relay.WebhookID(e.eid(b, kind)) }

	// --only-failed sends what failed, and nothing failed.
	failed := relay.ReplayQuery{EndpointID: ep.ID, From: from, To: to, OnlyFailed: true}
	plan, err := r.PlanReplay(ctx, failed)
	require.NoError(t, err)
	assert.Zero(t, plan.Total)
	rep, started, err := r.StartReplay(ctx, failed)
	require.NoError(t, err)
	assert.Zero(t, started.Total)
	assert.Zero(t, rep.Total)
	assert.Len(t, rows(), 1, "--only-failed backfills nothing")

	// --types narrows the backfill too.
	noShows := relay.ReplayQuery{EndpointID: ep.ID, From: from, To: to, Types: []string{"booking.no_show_*"}}
	plan, err = r.PlanReplay(ctx, noShows)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"booking.no_show_marked.v1": 2}, planCounts(plan))
	require.NotNil(t, plan.First)
	assert.Zero(t, plan.First.DeliveryID, "a dry run creates no delivery")
	_, started, sent := replayAndWait(t, r, rc, noShows)
	assert.Equal(t, plan.Total, started.Total)
	assert.Equal(t, planCounts(plan), planCounts(started))
	assert.Equal(t, map[string]int{id("calendly-bf-0", "no_show"): 1, id("calendly-bf-1", "no_show"): 1}, sentCounts(sent))
	assert.Len(t, rows(), 3)

	// The whole window: the backfill of the creates, the no-shows' deliveries now, the fan-out's.
	all := relay.ReplayQuery{EndpointID: ep.ID, From: from, To: to}
	want := map[string]int{id("calendly-bf-0", "scheduled"): 1, id("calendly-bf-1", "scheduled"): 1, id("calendly-bf-2", "scheduled"): 1,
		id("calendly-bf-new", "scheduled"): 1, id("calendly-bf-0", "no_show"): 1, id("calendly-bf-1", "no_show"): 1}
	var firstRun []relay.Delivery
	for run := range 2 {
		plan, err := r.PlanReplay(ctx, all)
		require.NoError(t, err)
		assert.Equal(t, map[string]int{"booking.scheduled.v1": 4, "booking.no_show_marked.v1": 2}, planCounts(plan), "run %d", run)
		rep, started, sent := replayAndWait(t, r, rc, all)
		assert.Equal(t, plan.Total, started.Total, "run %d: the dry run counts what the replay sends", run)
		assert.Equal(t, plan.Total, rep.Total)
		assert.Equal(t, planCounts(plan), planCounts(started))
		require.NotNil(t, plan.First)
		require.NotNil(t, started.First)
		assert.Equal(t, plan.First.WebhookID, started.First.WebhookID)
		assert.Equal(t, plan.Last.WebhookID, started.Last.WebhookID)
		assert.Equal(t, want, sentCounts(sent), "run %d: each event of the window once, with the fan-out's webhook-id", run)
		got := rows()
		assert.Len(t, got, 6, "run %d: one delivery per event", run)
		if run == 0 {
			firstRun = got
			continue
		}
		for i := range got {
			assert.Equal(t, firstRun[i].ID, got[i].ID, "the second replay reuses the deliveries")
			assert.Equal(t, firstRun[i].WebhookID, got[i].WebhookID)
		}
	}
	var marked int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(DISTINCT a.replay_id) FROM relay_attempts a JOIN relay_deliveries d ON d.id = a.delivery_id
WHERE d.endpoint_id = $1 AND d.event_id = $2`, ep.ID, e.eid("calendly-bf-2", "scheduled").String()).Scan(&marked))
	assert.Equal(t, 2, marked, "a backfilled delivery's attempts are marked with the replays")

	// A backfilled message is the fan-out's: the stream, its version and the state after it.
	for _, m := range rc.messages() {
		if m.id == id("calendly-bf-1", "no_show") {
			assert.Equal(t, "booking-calendly-bf-1", m.msg.Data.Stream)
			assert.Equal(t, uint64(2), m.msg.Data.Version)
			assert.True(t, m.msg.Data.State.NoShow)
			assert.Equal(t, 2, m.msg.Data.State.Events)
		}
	}
	ids := rc.ids()
	assert.NotContains(t, ids, id("calendly-bf-old", "scheduled"), "outside the window")
	assert.NotContains(t, ids, id("calendly-bf-2", "canceled"), "not a type of the endpoint")
	assert.Empty(t, rc.invalidMessages())
}

// Replays of one window started at once backfill each event once between them: the unique
// (endpoint, event) key makes the later insert wait for the earlier one and leave its row alone.
func TestConcurrentReplaysBackfillEachEventOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0}, replayPage: 7})
	ctx := context.Background()
	rc := newReceiver(t)
	// The receiver waits until every replay started: a delivery that succeeded before a replay looked
	// would be that replay's to send again.
	started := make(chan struct{})
	rc.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		<-started
		rc.serve(w, req)
	})
	from := time.Now().Add(-time.Minute)
	const n = 40
	e.recordCreates(t, "calendly-bfc", n, 8)
	// The backfill reads the log, which returns an event only once every older transaction has
	// ended: another package's open transaction in a parallel make test can hold the last ones back.
	eventually(t, time.Minute, "every create readable from the log", func() bool {
		all, err := e.store.ReadAll(ctx, eventlog.Position{}, 2*n)
		require.NoError(t, err)
		return len(all) >= n
	})
	ep := rc.endpointOn(t, r)
	q := relay.ReplayQuery{EndpointID: ep.ID, From: from, To: time.Now().Add(time.Minute)}

	const replays = 4
	reps := make([]relay.Replay, replays)
	errs := make([]error, replays)
	var wg sync.WaitGroup
	for i := range replays {
		wg.Go(func() { reps[i], _, errs[i] = r.StartReplay(ctx, q) })
	}
	wg.Wait()
	close(started)
	total := 0
	for i := range replays {
		require.NoError(t, errs[i])
		total += reps[i].Total
	}
	assert.Equal(t, n, total, "the replays backfilled each event once between them")
	eventually(t, 30*time.Second, "every delivery", func() bool { return len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) == n })
	time.Sleep(200 * time.Millisecond)
	assert.Len(t, deliveriesIn(t, r, ep.ID, ""), n)
	ids := rc.ids()
	assert.Len(t, ids, n)
	for id, c := range ids {
		assert.Equal(t, 1, c, "webhook-id %s sent once", id)
	}
}

// A replay's window is [from, to) of the recorded times, to the microsecond, for the deliveries that
// exist and for the events it backfills alike; a pending delivery is on its way and is not replayed;
// a replayed message is signed with the time of its attempt, not of its event.
func TestReplayWindowIsFromInclusiveToExclusive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0, time.Hour}})
	ctx := context.Background()
	rc := newReceiver(t)
	late := relay.WebhookID(e.eid("calendly-win-late", "scheduled"))
	rc.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("webhook-id") == late {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		rc.serve(w, req)
	})
	for i := range 3 {
		b := fmt.Sprintf("calendly-win-%d", i)
		e.record(t, b, e.scheduled(b, 9+i))
	}
	at := map[string]time.Time{} // webhook-id -> recorded time, as deliveries keep it
	eventually(t, time.Minute, "the three events readable from the log", func() bool {
		all, err := e.store.ReadAll(ctx, eventlog.Position{}, 100)
		require.NoError(t, err)
		for _, ev := range all {
			at[relay.WebhookID(ev.ID)] = ev.RecordedAt.Truncate(time.Microsecond)
		}
		return len(at) >= 3
	})
	id := func(i int) string { return relay.WebhookID(e.eid(fmt.Sprintf("calendly-win-%d", i), "scheduled")) }
	t0, t1, t2 := at[id(0)], at[id(1)], at[id(2)]
	require.True(t, t0.Before(t1) && t1.Before(t2), "three distinct recorded times")
	ep := rc.endpointOn(t, r)

	window := func(from, to time.Time) (ids []string, deliveries []int64) {
		t.Helper()
		plan, err := r.PlanReplay(ctx, relay.ReplayQuery{EndpointID: ep.ID, From: from, To: to})
		require.NoError(t, err)
		if plan.Total == 0 {
			return nil, nil
		}
		require.Equal(t, 1, plan.Total, "%s–%s: %+v", from, to, plan)
		return []string{plan.First.WebhookID}, []int64{plan.First.DeliveryID}
	}
	// Backfill: no delivery exists yet.
	ids, dels := window(t0, t1)
	assert.Equal(t, []string{id(0)}, ids, "from is in the window, to is not")
	assert.Equal(t, []int64{0}, dels)
	ids, _ = window(t1, t1.Add(time.Microsecond))
	assert.Equal(t, []string{id(1)}, ids)
	ids, _ = window(t1.Add(time.Microsecond), t2)
	assert.Empty(t, ids)

	// A pending delivery (waiting an hour for its retry) is not replayed.
	e.record(t, "win-late", e.scheduled("calendly-win-late", 13))
	eventually(t, 30*time.Second, "the late event's failed attempt", func() bool {
		ds := deliveriesIn(t, r, ep.ID, relay.StatePending)
		return len(ds) == 1 && ds[0].Attempts == 1
	})
	// The replay's attempts are a second later than any event was recorded.
	eventually(t, 5*time.Second, "the next second", func() bool { return time.Now().Unix() > t2.Unix()+1 })
	start := time.Now()
	rep, plan, sent := replayAndWait(t, r, rc, relay.ReplayQuery{EndpointID: ep.ID, From: t0, To: time.Now().Add(time.Minute)})
	assert.Equal(t, 3, plan.Total, "the window's three events, not the pending delivery: %+v", plan)
	assert.Equal(t, 3, rep.Total)
	assert.Equal(t, map[string]int{id(0): 1, id(1): 1, id(2): 1}, sentCounts(sent))
	for _, m := range sent {
		ts, err := strconv.ParseInt(m.header.Get(standard.HeaderTimestamp), 10, 64)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, ts, start.Unix(), "webhook-timestamp is the attempt's time")
	}
	pending := deliveriesIn(t, r, ep.ID, relay.StatePending)
	require.Len(t, pending, 1)
	assert.Zero(t, pending[0].ReplayID, "the pending delivery was left alone")
	assert.Equal(t, 1, pending[0].Attempts)

	// The deliveries exist now: the same window selects them.
	ids, dels = window(t0, t1)
	assert.Equal(t, []string{id(0)}, ids, "from is in the window, to is not")
	require.Len(t, dels, 1)
	assert.NotZero(t, dels[0])
	ids, _ = window(t1, t1.Add(time.Microsecond))
	assert.Equal(t, []string{id(1)}, ids)
	ids, _ = window(t1.Add(time.Microsecond), t2)
	assert.Empty(t, ids)
	assert.Empty(t, rc.invalidMessages())
}

// Retrying a pending delivery that waits for its retry gives it a fresh run of the schedule: when the
// retry fails too, the delivery waits for the schedule's second attempt again rather than being dead.
func TestRetryingAWaitingDeliveryStartsItsScheduleOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0, time.Hour}})
	ctx := context.Background()
	rc := newReceiver(t)
	rc.setAnswer(func(int) int { return http.StatusInternalServerError })
	ep, _, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url()})
	require.NoError(t, err)
	e.record(t, "over-1", e.scheduled("calendly-over-1", 9))
	eventually(t, 30*time.Second, "the first attempt failed and its job waits an hour", func() bool {
		var waiting int
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM river_job
WHERE kind = 'bookingledger.relay_deliver' AND state = 'scheduled'`).Scan(&waiting))
		return waiting == 1
	})
	d := deliveriesIn(t, r, ep.ID, relay.StatePending)
	require.Len(t, d, 1)
	require.Equal(t, 1, d[0].Attempts)
	rep, err := r.RetryDelivery(ctx, d[0].ID)
	require.NoError(t, err)
	eventually(t, 30*time.Second, "the retry's failed attempt", func() bool {
		got, _, err := r.DeliveryWithAttempts(ctx, d[0].ID)
		require.NoError(t, err)
		return got.Attempts == 2
	})
	got, attempts, err := r.DeliveryWithAttempts(ctx, d[0].ID)
	require.NoError(t, err)
	assert.Equal(t, relay.StatePending, got.State, "the retry's schedule has a second attempt")
	assert.Greater(t, time.Until(got.NextAttemptAt), 50*time.Minute)
	require.Len(t, attempts, 2)
	assert.Equal(t, rep.ID, attempts[1].ReplayID)
}
