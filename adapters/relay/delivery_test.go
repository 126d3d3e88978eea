package relay_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers/standard"
	"bookingledger/adapters/relay"
)

// Every event reaches every matching endpoint once, signed so that the project's own verifier
// accepts it, with the stream version and the booking's state after the event; a provider's retry of
// a delivery (a duplicate in the ledger) sends nothing more.
func TestEveryEventIsDeliveredOnceWithVersionAndState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{})
	ctx := context.Background()
	all := newReceiver(t)
	cancels := newReceiver(t)
	epAll, secretAll, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: all.url(), Description: "crm"})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(secretAll, "whsec_"))
	all.setSecrets(secretAll)
	epCancels, secretCancels, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: cancels.url(), Types: []string{"booking.canceled.*"}})
	require.NoError(t, err)
	cancels.setSecrets(secretCancels)

	for i := range 5 {
		b := fmt.Sprintf("calendly-relay-%d", i)
		e.record(t, b+"-create", e.scheduled(b, 9+i))
		e.record(t, b+"-create", e.scheduled(b, 9+i)) // the provider's retry: a duplicate
		if i%2 == 0 {
			e.record(t, b+"-cancel", e.canceled(b))
		}
	}
	eventually(t, 30*time.Second, "8 messages at the first endpoint and 3 at the second", func() bool {
		return len(all.messages()) >= 8 && len(cancels.messages()) >= 3
	})
	time.Sleep(300 * time.Millisecond) // anything extra would arrive now
	assert.Empty(t, all.invalidMessages())
	assert.Empty(t, cancels.invalidMessages())
	for id, n := range all.ids() {
		assert.Equal(t, 1, n, "webhook-id %s", id)
	}
	assert.Len(t, all.ids(), 8)
	assert.Len(t, cancels.ids(), 3)

	for _, m := range all.messages() {
		d := m.msg.Data
		assert.Equal(t, "booking-"+d.Booking, d.Stream)
		assert.Equal(t, m.msg.Type, d.Event.Type)
		assert.Equal(t, "msg_"+d.Event.ID, m.id)
		switch d.Event.Type {
		case "booking.scheduled.v1":
			assert.EqualValues(t, 1, d.Version)
			assert.Equal(t, "active", d.State.Status)
			require.NotNil(t, d.State.Slot)
			assert.Equal(t, []string{"host-1"}, d.State.Slot.Resources)
			assert.Contains(t, string(d.Event.Payload), `"meeting":"m-`+d.Booking+`"`)
		case "booking.canceled.v1":
			assert.EqualValues(t, 2, d.Version)
			assert.Equal(t, "canceled", d.State.Status)
			// The reason is what a person typed: kept apart from the events (ADR 0015), so neither the
			// folded state nor the event the relay sends holds it.
			assert.Empty(t, d.State.CancelReason)
			assert.NotContains(t, string(d.Event.Payload), "no longer needed")
			assert.Equal(t, 2, d.State.Events)
		default:
			t.Errorf("unexpected type %s", d.Event.Type)
		}
	}
	for _, m := range cancels.messages() {
		assert.Equal(t, "booking.canceled.v1", m.msg.Type)
	}
	for _, ep := range []int64{epAll.ID, epCancels.ID} {
		ok := deliveriesIn(t, r, ep, relay.StateSucceeded)
		for _, d := range ok {
			_, attempts, err := r.DeliveryWithAttempts(ctx, d.ID)
			require.NoError(t, err)
			require.Len(t, attempts, 1)
			assert.True(t, attempts[0].Succeeded)
			assert.Equal(t, http.StatusNoContent, attempts[0].Status)
		}
	}
}

// A receiver that is down and comes back gets every delivery after the backoff, each with exactly one
// successful attempt after the failed ones.
func TestReceiverDownThenUpGetsEveryDeliveryOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	schedule := []time.Duration{0}
	for range 40 {
		schedule = append(schedule, 200*time.Millisecond)
	}
	r := e.startRelay(t, relayOpts{schedule: schedule, workers: 8})
	ctx := context.Background()
	addr, up := downAddr(t)
	// No breaker: with one, the deliveries after the fifth failure wait without an attempt
	// (TestBreakerHoldsTheBacklogWhileTheReceiverIsDownThenDrainsAtTheRate); here each retries on its own.
	ep, secret, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: "http://" + addr + "/hook", Options: relay.SettingsUpdate{BreakerFailures: ptr(0)}})
	require.NoError(t, err)
	for i := range 6 {
		b := fmt.Sprintf("calendly-down-%d", i)
		e.record(t, b, e.scheduled(b, 8+i))
	}
	eventually(t, 30*time.Second, "a failed attempt of every delivery", func() bool {
		var n int
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(DISTINCT delivery_id) FROM relay_attempts WHERE NOT succeeded`).Scan(&n))
		return n == 6
	})

	rc := newReceiverAt(t, addr, up, secret)
	eventually(t, 30*time.Second, "every delivery succeeded", func() bool {
		return len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) == 6
	})
	assert.Empty(t, rc.invalidMessages())
	assert.Len(t, rc.ids(), 6)
	for _, d := range deliveriesIn(t, r, ep.ID, "") {
		_, attempts, err := r.DeliveryWithAttempts(ctx, d.ID)
		require.NoError(t, err)
		ok := 0
		for i, a := range attempts {
			if a.Succeeded {
				ok++
				assert.Equal(t, len(attempts)-1, i, "the success is the last attempt")
			} else {
				assert.Zero(t, a.Status, "connection refused has no status")
				assert.NotEmpty(t, a.Error)
			}
		}
		assert.Equal(t, 1, ok, "delivery %d: exactly one successful attempt", d.ID)
		assert.GreaterOrEqual(t, len(attempts), 2)
		for i := 1; i < len(attempts); i++ {
			assert.GreaterOrEqual(t, attempts[i].At.Sub(attempts[i-1].At), 150*time.Millisecond, "backoff between attempts")
		}
	}
}

// newReceiverAt starts a receiver on a given address (one that was down until now: up frees it).
func newReceiverAt(t *testing.T, addr string, up func(), secrets ...string) *receiver {
	t.Helper()
	rc := newReceiver(t, secrets...)
	rc.srv.Close()
	up()
	var ln net.Listener
	eventually(t, 5*time.Second, "the address to be free", func() bool {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err == nil
	})
	srv := &http.Server{Handler: http.HandlerFunc(rc.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return rc
}

// After rotate-secret every message carries two signatures: a receiver that has only the old secret
// and one that has only the new one both verify it.
func TestRotationSignsWithBothSecrets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{})
	ctx := context.Background()
	rc := newReceiver(t)
	rc.verify = nil
	ep, oldSecret, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url()})
	require.NoError(t, err)
	rotated, newSecret, err := r.RotateSecret(ctx, ep.ID)
	require.NoError(t, err)
	assert.NotEqual(t, oldSecret, newSecret)
	assert.WithinDuration(t, time.Now().Add(relay.RotationOverlap), rotated.PreviousUntil, time.Minute)
	e.record(t, "rot", e.scheduled("calendly-rot", 9))
	eventually(t, 30*time.Second, "the message", func() bool { return len(rc.messages()) == 1 })
	m := rc.messages()[0]
	sigs, err := standard.ParseSignatures(m.header.Get(standard.HeaderSignature))
	require.NoError(t, err)
	assert.Len(t, sigs, 2)
	for _, s := range []string{oldSecret, newSecret} {
		p, err := standard.New(providersSecrets(s), 0)
		require.NoError(t, err)
		_, err = p.Verify(m.header, m.body, time.Now())
		assert.NoError(t, err, "verify with one of the secrets")
	}
	other, err := standard.New(providersSecrets(relay.NewSecret()), 0)
	require.NoError(t, err)
	_, err = other.Verify(m.header, m.body, time.Now())
	assert.Error(t, err, "a stranger's secret does not verify")

	// Once the overlap is over, only the new secret signs.
	_, err = e.pool.Exec(ctx, `UPDATE relay_endpoints SET previous_until = now() - interval '1 second'`)
	require.NoError(t, err)
	e.record(t, "rot-2", e.canceled("calendly-rot"))
	eventually(t, 30*time.Second, "the second message", func() bool { return len(rc.messages()) == 2 })
	sigs, err = standard.ParseSignatures(rc.messages()[1].header.Get(standard.HeaderSignature))
	require.NoError(t, err)
	assert.Len(t, sigs, 1)
}

// One job attempts many deliveries of an endpoint together (the projection plans a catch-up of 48
// events at once) and each delivery still follows its own course: the one that succeeds is done,
// the ones that fail with a short wait (the schedule's 50 ms, or Retry-After: 1) are retried by the
// same job after their wait, and the one told to come back in 2 s (beyond the inline wait) gets a
// job of its own due then. Every delivery succeeds exactly once, and no delivery job is left.
func TestAJobOfManyDeliveriesGivesEachItsOwnCourse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.startRelay(t, relayOpts{noProjection: true, workers: 8})
	ctx := context.Background()
	rc := newReceiver(t)
	const n = 48
	// webhook-id -> 0 succeed, 1 fail once (500), 2 fail once (503, Retry-After: 2), 3 fail once (429, Retry-After: 1)
	course := map[string]int{}
	for i := range n {
		course["msg_"+e.eid(fmt.Sprintf("calendly-batch-%d", i), "scheduled").String()] = i % 4
	}
	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	rc.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id := req.Header.Get("webhook-id")
		mu.Lock()
		seen[id]++
		k := seen[id]
		mu.Unlock()
		switch {
		case k == 1 && course[id] == 1:
			w.WriteHeader(http.StatusInternalServerError)
		case k == 1 && course[id] == 2:
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
		case k == 1 && course[id] == 3:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			rc.serve(w, req)
		}
	})
	ep, secret, err := first.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url()})
	require.NoError(t, err)
	rc.setSecrets(secret)
	e.recordCreatesAtOnce(t, "calendly-batch", n, 12)
	e.startRelay(t, relayOpts{workers: 8}) // its projection plans the 48 events in one batch

	eventually(t, 60*time.Second, "every delivery succeeded", func() bool {
		return len(deliveriesIn(t, first, ep.ID, relay.StateSucceeded)) == n
	})
	var most int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT coalesce(max(jsonb_array_length(args->'delivery_ids')), 1) FROM river_job
WHERE kind = 'bookingledger.relay_deliver'`).Scan(&most))
	assert.Greater(t, most, 1, "deliveries were attempted by jobs of several")
	eventually(t, 10*time.Second, "no delivery job left", func() bool {
		var live int
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM river_job
WHERE kind = 'bookingledger.relay_deliver' AND state NOT IN ('completed', 'cancelled', 'discarded')`).Scan(&live))
		return live == 0
	})
	time.Sleep(300 * time.Millisecond) // anything extra would arrive now
	assert.Empty(t, rc.invalidMessages())
	assert.Len(t, rc.ids(), n)
	for id, c := range rc.ids() {
		assert.Equal(t, 1, c, "webhook-id %s succeeded once", id)
	}
	mu.Lock()
	for id, c := range seen {
		assert.Equal(t, 1+min(course[id], 1), c, "webhook-id %s: requests", id)
	}
	mu.Unlock()
	for _, d := range deliveriesIn(t, first, ep.ID, "") {
		_, attempts, err := first.DeliveryWithAttempts(ctx, d.ID)
		require.NoError(t, err)
		switch course[d.WebhookID] {
		case 0:
			require.Len(t, attempts, 1)
		case 1:
			require.Len(t, attempts, 2)
			assert.Equal(t, http.StatusInternalServerError, attempts[0].Status)
			assert.GreaterOrEqual(t, attempts[1].At.Sub(attempts[0].At), 45*time.Millisecond, "the schedule's wait")
		case 2:
			require.Len(t, attempts, 2)
			assert.Equal(t, http.StatusServiceUnavailable, attempts[0].Status)
			assert.GreaterOrEqual(t, attempts[1].At.Sub(attempts[0].At), 1950*time.Millisecond, "Retry-After: 2")
		case 3:
			require.Len(t, attempts, 2)
			assert.Equal(t, http.StatusTooManyRequests, attempts[0].Status)
			assert.GreaterOrEqual(t, attempts[1].At.Sub(attempts[0].At), 950*time.Millisecond, "Retry-After: 1")
		}
		assert.True(t, attempts[len(attempts)-1].Succeeded)
	}
	got, err := first.Endpoint(ctx, ep.ID)
	require.NoError(t, err)
	assert.Zero(t, got.ConsecutiveFailures, "the streak ended")
}

// A round whose failures open the breaker makes one of them the probe; a Retry-After it was told
// still holds: the probe goes no earlier than the receiver asked, and neither do the deliveries the
// breaker held and released once the probe succeeded.
func TestAProbeHonoursItsOwnRetryAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.startRelay(t, relayOpts{noProjection: true, workers: 8})
	ctx := context.Background()
	rc := newReceiver(t)
	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	rc.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id := req.Header.Get("webhook-id")
		mu.Lock()
		seen[id]++
		k := seen[id]
		mu.Unlock()
		if k == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		rc.serve(w, req)
	})
	ep, secret, err := first.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url(), Options: relay.SettingsUpdate{BreakerFailures: ptr(2)}})
	require.NoError(t, err)
	rc.setSecrets(secret)
	const n = 6
	e.recordCreatesAtOnce(t, "calendly-probe-ra", n, 6)
	e.startRelay(t, relayOpts{workers: 8})

	// While a delivery waits, its due time is never before what the receiver asked (the attempt itself
	// may come later still: a job River schedules).
	early := 0
	eventually(t, 30*time.Second, "every delivery succeeded", func() bool {
		var k int
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM relay_deliveries d JOIN relay_attempts a ON a.delivery_id = d.id
WHERE d.endpoint_id = $1 AND d.state = 'pending' AND a.status = 503 AND d.next_attempt_at < a.at + interval '1950 milliseconds'`, ep.ID).Scan(&k))
		early = max(early, k)
		return len(deliveriesIn(t, first, ep.ID, relay.StateSucceeded)) == n
	})
	assert.Zero(t, early, "deliveries due before their Retry-After")
	for _, d := range deliveriesIn(t, first, ep.ID, "") {
		_, attempts, err := first.DeliveryWithAttempts(ctx, d.ID)
		require.NoError(t, err)
		require.Len(t, attempts, 2, "delivery %d", d.ID)
		assert.Equal(t, http.StatusServiceUnavailable, attempts[0].Status)
		assert.GreaterOrEqual(t, attempts[1].At.Sub(attempts[0].At), 1950*time.Millisecond, "delivery %d: Retry-After: 2", d.ID)
	}
}

// A description a text column cannot hold is a bad request (it reached the INSERT and answered 500).
func TestAddEndpointRefusesADescriptionNoColumnHolds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{})
	rcv := newReceiver(t)
	for _, d := range []string{"crm\x00", "crm\xff", strings.Repeat("d", 501)} {
		_, _, err := r.AddEndpoint(context.Background(), relay.NewEndpoint{URL: rcv.url(), Description: d})
		assert.ErrorIs(t, err, relay.ErrInvalid, "%q", d)
	}
	_, _, err := r.AddEndpoint(context.Background(), relay.NewEndpoint{URL: rcv.url(), Description: "crm, two\nlines"})
	assert.NoError(t, err)
}

// A job of many deliveries to a slow receiver, with one request slot: the deliveries still waiting
// for the slot when the job has no time left for a whole attempt go to jobs of their own instead of
// being cut short by the job's deadline and recorded as the receiver's failures.
func TestDeliveriesWaitingForASlotAreHandedOnNotFailed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// An attempt's timeout far above the receiver's 300 ms, so that one slowed by tests beside it is not
	// recorded as a failure; a job's room for one: a delivery still waiting for the slot a second after
	// the job began (its deadline less an attempt and a second) is handed on.
	opts := relayOpts{workers: 1, attemptTimeout: 2 * time.Second, jobTimeout: 4 * time.Second}
	first := e.startRelay(t, relayOpts{noProjection: true, workers: 1, attemptTimeout: opts.attemptTimeout, jobTimeout: opts.jobTimeout})
	ctx := context.Background()
	rc := newReceiver(t)
	rc.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		time.Sleep(300 * time.Millisecond)
		rc.serve(w, req)
	})
	ep, secret, err := first.AddEndpoint(ctx, relay.NewEndpoint{URL: rc.url()})
	require.NoError(t, err)
	rc.setSecrets(secret)
	const n = 16 // about 4.8 s of requests one at a time: more than one 4 s job can send
	e.recordCreatesAtOnce(t, "calendly-slow", n, 12)
	e.startRelay(t, opts)

	eventually(t, 60*time.Second, "every delivery succeeded", func() bool {
		return len(deliveriesIn(t, first, ep.ID, relay.StateSucceeded)) == n
	})
	var most int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT coalesce(max(jsonb_array_length(args->'delivery_ids')), 1) FROM river_job
WHERE kind = 'bookingledger.relay_deliver'`).Scan(&most))
	require.Greater(t, most, n/2, "the deliveries were planned as one job")
	for _, d := range deliveriesIn(t, first, ep.ID, "") {
		_, attempts, err := first.DeliveryWithAttempts(ctx, d.ID)
		require.NoError(t, err)
		require.Len(t, attempts, 1, "delivery %d: one attempt, and it succeeded", d.ID)
		assert.True(t, attempts[0].Succeeded, "delivery %d: %s", d.ID, attempts[0].Error)
	}
	for id, c := range rc.ids() {
		assert.Equal(t, 1, c, "webhook-id %s", id)
	}
	got, err := first.Endpoint(ctx, ep.ID)
	require.NoError(t, err)
	assert.Zero(t, got.ConsecutiveFailures)
}

// River runs a job again when the process that ran it stopped (rescue after a crash, or a retry):
// its deliveries that finished already (succeeded or dead) are not sent again.
func TestAJobRunAgainSendsNothingFinished(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0}})
	ctx := context.Background()
	rc := newReceiver(t)
	ep := rc.endpointOn(t, r)
	rc.setAnswer(func(n int) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	e.record(t, "again-1", e.scheduled("calendly-again-1", 9))
	e.record(t, "again-2", e.scheduled("calendly-again-2", 10))
	eventually(t, 30*time.Second, "one dead and one succeeded", func() bool {
		return len(deliveriesIn(t, r, ep.ID, relay.StateDead)) == 1 && len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) == 1
	})
	jobIDs := func() []int64 {
		rows, err := e.pool.Query(ctx, `SELECT id FROM river_job WHERE kind = 'bookingledger.relay_deliver' AND state = 'completed'`)
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		return ids
	}
	eventually(t, 10*time.Second, "the jobs completed", func() bool { return len(jobIDs()) > 0 })
	ids := jobIDs()
	client, err := river.NewClient(riverpgxv5.New(e.pool), &river.Config{})
	require.NoError(t, err)
	for _, id := range ids {
		_, err := client.JobRetry(ctx, id)
		require.NoError(t, err)
	}
	eventually(t, 30*time.Second, "the jobs run again", func() bool {
		var done int
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE id = ANY($1) AND state = 'completed' AND attempt > 1`,
			ids).Scan(&done))
		return done == len(ids)
	})
	assert.Equal(t, 2, rc.requestCount(), "nothing finished was sent again")
	for _, d := range deliveriesIn(t, r, ep.ID, "") {
		assert.Equal(t, 1, d.Attempts, "delivery %d", d.ID)
	}
}
