package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventlogtest"
	"bookingledger/adapters/relay"
	"bookingledger/domain/booking"
)

// request is one attempt a versionReceiver saw, whatever it answered.
type request struct {
	booking string
	version uint64
	status  int
	skipped []uint64
	at      time.Time
}

// versionReceiver is a real HTTP server that reads each message's booking and version and answers
// what answer says (nil: 204), recording every request in arrival order.
type versionReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []request
	answer func(booking string, version uint64) int
}

func newVersionReceiver(t *testing.T) *versionReceiver {
	t.Helper()
	v := &versionReceiver{}
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m relay.Message
		if err := json.Unmarshal(body, &m); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		v.mu.Lock()
		answer := v.answer
		v.mu.Unlock()
		status := http.StatusNoContent
		if answer != nil {
			status = answer(m.Data.Booking, m.Data.Version)
		}
		v.mu.Lock()
		v.reqs = append(v.reqs, request{booking: m.Data.Booking, version: m.Data.Version, status: status,
			skipped: m.Data.SkippedVersions, at: time.Now()})
		v.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(v.srv.Close)
	return v
}

func (v *versionReceiver) setAnswer(f func(booking string, version uint64) int) {
	v.mu.Lock()
	v.answer = f
	v.mu.Unlock()
}

func (v *versionReceiver) requests() []request {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.reqs)
}

// accepted returns, per booking, the versions answered with a 2xx, in arrival order.
func (v *versionReceiver) accepted() map[string][]uint64 {
	out := map[string][]uint64{}
	for _, r := range v.requests() {
		if r.status/100 == 2 {
			out[r.booking] = append(out[r.booking], r.version)
		}
	}
	return out
}

// fiveEvents are five events of booking b: scheduled, no-show marked, cleared, marked again, canceled.
func (e *env) fiveEvents(b string) []booking.Event {
	mk := func(kind string, p booking.Payload) booking.Event {
		return booking.Event{ID: e.eid(b, kind), Booking: booking.ID(b), Provider: "calendly", ProviderRef: b + " " + kind,
			OccurredAt: day.Add(-time.Hour), Payload: p}
	}
	return []booking.Event{e.scheduled(b, 9), mk("marked", booking.NoShowMarked{}), mk("cleared", booking.NoShowCleared{}),
		mk("marked again", booking.NoShowMarked{}), e.canceled(b)}
}

// recordShuffled records each booking's events, one delivery per event, the bookings interleaved in
// a random order (each booking's own events in their order). The bookings are dealt to recorders
// lanes that record at once, each in the shuffled order.
func (e *env) recordShuffled(t *testing.T, rng *rand.Rand, events map[string][]booking.Event) {
	t.Helper()
	var queue []string
	for b, evs := range events {
		for range evs {
			queue = append(queue, b)
		}
	}
	slices.Sort(queue)
	bookings := slices.Compact(slices.Clone(queue))
	lane := map[string]int{}
	for i, b := range bookings {
		lane[b] = i % recorders
	}
	rng.Shuffle(len(queue), func(i, j int) { queue[i], queue[j] = queue[j], queue[i] })
	var lanes [recorders]func() error
	for l := range lanes {
		lanes[l] = func() error {
			next := map[string]int{}
			for _, b := range queue {
				if lane[b] != l {
					continue
				}
				ev := events[b][next[b]]
				next[b]++
				if _, err := e.tryRecord(fmt.Sprintf("%s-%d", b, next[b]), ev); err != nil {
					return fmt.Errorf("record %s version %d: %w", b, next[b], err)
				}
			}
			return nil
		}
	}
	recordConcurrently(t, lanes)
}

func orderedEndpoint(t *testing.T, r *relay.Relay, url string, opts relay.SettingsUpdate) relay.Endpoint {
	t.Helper()
	yes := true
	opts.Ordered = &yes
	ep, _, err := r.AddEndpoint(context.Background(), relay.NewEndpoint{URL: url, Options: opts})
	require.NoError(t, err)
	require.True(t, ep.Ordered)
	return ep
}

// assertInOrder checks that no booking's version was attempted before the one below it was accepted,
// and that each booking was accepted exactly once per version, 1 to n, in that order.
func assertInOrder(t *testing.T, reqs []request, bookings []string, n uint64) {
	t.Helper()
	done := map[string]uint64{} // highest accepted version
	for i, r := range reqs {
		require.LessOrEqualf(t, r.version, done[r.booking]+1, "request %d: %s version %d attempted before version %d was accepted",
			i, r.booking, r.version, done[r.booking]+1)
		if r.status/100 == 2 {
			require.Equalf(t, done[r.booking]+1, r.version, "request %d: %s version %d accepted after %d", i, r.booking, r.version, done[r.booking])
			done[r.booking] = r.version
		}
	}
	for _, b := range bookings {
		assert.Equalf(t, n, done[b], "booking %s: highest version accepted", b)
	}
}

// 50 bookings × 5 events to an ordered endpoint whose receiver fails at random and answers slowly:
// every booking's versions are attempted and accepted strictly in order, each exactly once.
func TestOrderedEndpointDeliversEachBookingsVersionsInOrder(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 34))
	e := newEnv(t)
	schedule := []time.Duration{0}
	for range 15 {
		schedule = append(schedule, 30*time.Millisecond)
	}
	r := e.startRelay(t, relayOpts{schedule: schedule, workers: 8})
	rc := newVersionReceiver(t)
	var mu sync.Mutex
	answers := rand.New(rand.NewPCG(seed, 35))
	rc.setAnswer(func(string, uint64) int {
		mu.Lock()
		fail, sleep := answers.IntN(4) == 0, time.Duration(answers.IntN(15))*time.Millisecond
		mu.Unlock()
		time.Sleep(sleep)
		if fail {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	ep := orderedEndpoint(t, r, rc.srv.URL, relay.SettingsUpdate{})
	events := map[string][]booking.Event{}
	var bookings []string
	for i := range 50 {
		b := fmt.Sprintf("calendly-order-%d", i)
		bookings = append(bookings, b)
		events[b] = e.fiveEvents(b)
	}
	e.recordShuffled(t, rng, events)
	eventually(t, 3*time.Minute, "every delivery to succeed", func() bool {
		return len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) == 250
	})
	assertInOrder(t, rc.requests(), bookings, 5)
	assert.Empty(t, deliveriesIn(t, r, ep.ID, relay.StateDead))
}

// A booking whose first version keeps failing holds back only its own later versions: every other
// booking arrives whole meanwhile, and the stuck one follows in order once its receiver recovers.
func TestOrderedEndpointStuckBookingDelaysOnlyItself(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	e := newEnv(t)
	schedule := []time.Duration{0}
	for range 100 {
		schedule = append(schedule, 50*time.Millisecond)
	}
	r := e.startRelay(t, relayOpts{schedule: schedule})
	rc := newVersionReceiver(t)
	const stuck = "calendly-stuck"
	var mu sync.Mutex
	recovered := false
	rc.setAnswer(func(b string, _ uint64) int {
		mu.Lock()
		defer mu.Unlock()
		if b == stuck && !recovered {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	// No breaker: the stuck booking's failures alone would open it once the others are done.
	zero := 0
	ep := orderedEndpoint(t, r, rc.srv.URL, relay.SettingsUpdate{BreakerFailures: &zero})
	events := map[string][]booking.Event{stuck: e.fiveEvents(stuck)}
	var others []string
	for i := range 10 {
		b := fmt.Sprintf("calendly-free-%d", i)
		others = append(others, b)
		events[b] = e.fiveEvents(b)
	}
	e.recordShuffled(t, rng, events)
	eventually(t, time.Minute, "every other booking to arrive", func() bool {
		got := rc.accepted()
		for _, b := range others {
			if len(got[b]) != 5 {
				return false
			}
		}
		return true
	})
	for _, rq := range rc.requests() {
		if rq.booking == stuck {
			require.Equal(t, uint64(1), rq.version, "the stuck booking's later versions were attempted")
		}
	}
	// Its last events may be planned a batch after the others' arrived: wait for all five, none dead.
	eventually(t, time.Minute, "the stuck booking's five deliveries to wait, none dead", func() bool {
		pending, err := r.Deliveries(context.Background(), relay.DeliveryQuery{EndpointID: ep.ID, Booking: stuck, State: relay.StatePending})
		require.NoError(t, err)
		return len(pending) == 5
	})
	mu.Lock()
	recovered = true
	mu.Unlock()
	eventually(t, time.Minute, "the stuck booking to arrive", func() bool { return len(rc.accepted()[stuck]) == 5 })
	assertInOrder(t, rc.requests(), append(others, stuck), 5)
}

// When a version goes dead, the booking's next message names it in skipped_versions; the one after
// names nothing.
func TestOrderedEndpointNamesSkippedVersions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0, 20 * time.Millisecond}})
	rc := newVersionReceiver(t)
	rc.setAnswer(func(_ string, v uint64) int {
		if v == 2 || v == 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	zero := 0
	ep := orderedEndpoint(t, r, rc.srv.URL, relay.SettingsUpdate{BreakerFailures: &zero})
	const b = "calendly-skips"
	e.record(t, "skips", e.fiveEvents(b)...)
	eventually(t, time.Minute, "versions 4 and 5", func() bool { return len(rc.accepted()[b]) == 3 })
	got := map[uint64][]uint64{}
	for _, rq := range rc.requests() {
		if rq.status/100 == 2 {
			got[rq.version] = rq.skipped
		}
	}
	assert.Equal(t, map[uint64][]uint64{1: nil, 4: {2, 3}, 5: nil}, got)
	assert.Len(t, deliveriesIn(t, r, ep.ID, relay.StateDead), 2)
	// deliveries --booking lists them in order.
	inOrder, err := r.Deliveries(context.Background(), relay.DeliveryQuery{Booking: b})
	require.NoError(t, err)
	var versions []uint64
	for _, d := range inOrder {
		versions = append(versions, d.Version)
	}
	assert.Equal(t, []uint64{1, 2, 3, 4, 5}, versions)
	// Each dead version was attempted its two times, and nothing after it before it died.
	assertInOrderWithDead(t, rc.requests(), map[uint64]bool{2: true, 3: true})
}

// assertInOrderWithDead checks that a version was attempted only after each lower one was accepted or
// (dead) had made its last attempt.
func assertInOrderWithDead(t *testing.T, reqs []request, dead map[uint64]bool) {
	t.Helper()
	last := map[uint64]int{}
	for i, r := range reqs {
		last[r.version] = i
	}
	for i, r := range reqs {
		for v := uint64(1); v < r.version; v++ {
			require.Lessf(t, last[v], i, "version %d attempted (request %d) before version %d ended (request %d)", r.version, i, v, last[v])
		}
	}
}

// A receiver down for ten times the whole schedule (the test's schedule runs in ~1 s, as the
// default's 33 h) with 500 deliveries pending: the breaker holds them, so the outage costs the
// deliveries in flight when it opened and one probe at a time, not 500 × the schedule; none goes
// dead. After recovery the backlog drains, every delivery once, no faster than the endpoint's rate.
func TestBreakerHoldsTheBacklogWhileTheReceiverIsDownThenDrainsAtTheRate(t *testing.T) {
	// Not parallel: its bounds are in wall time, which tests beside it on two cores stretch.
	if eventlogtest.SelectedStore(t) == eventlogtest.StoreESDB {
		// The breaker, its probes and the throttle are the relay's tables' (PostgreSQL) whatever the
		// event store; on EventStoreDB the backlog alone took minutes to record and plan.
		t.Skip("store-independent: the PostgreSQL pass runs it")
	}
	e := newEnv(t)
	schedule := []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
		200 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}
	// Two workers: at most two jobs of up to 32 deliveries each are in flight when the breaker opens.
	r := e.startRelay(t, relayOpts{schedule: schedule, workers: 2})
	rc := newVersionReceiver(t)
	var mu sync.Mutex
	down := true
	rc.setAnswer(func(string, uint64) int {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	// 500 rather than 1,000, which took 80 s on a loaded machine: the bound on the outage's requests
	// below is the same share of the backlog (two in five), still far below one attempt of each.
	const n = 500
	const rate = 200.0
	ep, _, err := r.AddEndpoint(context.Background(), relay.NewEndpoint{URL: rc.srv.URL, Options: relay.SettingsUpdate{RatePerSecond: ptr(rate)}})
	require.NoError(t, err)
	e.recordCreatesAtOnce(t, "calendly-backlog", n, 10)
	eventually(t, time.Minute, "the breaker to open and hold the backlog", func() bool {
		var held int
		require.NoError(t, e.pool.QueryRow(context.Background(),
			`SELECT count(*) FROM relay_deliveries WHERE endpoint_id = $1 AND held = 'breaker'`, ep.ID).Scan(&held))
		return held > n-100
	})
	opened := time.Now()
	time.Sleep(10 * 1200 * time.Millisecond / 4) // the outage goes on: 3 s, about 3 runs of the schedule
	mu.Lock()
	down = false
	mu.Unlock()
	outage := time.Since(opened)
	reqs := rc.requests()
	// The probes began with the breaker, before the fan-out had planned the backlog it then held (a
	// slow store or machine takes seconds to): their pace is measured from the first request on.
	probing := outage
	if len(reqs) > 0 {
		probing = max(probing, time.Since(reqs[0].at))
	}
	perDelivery := map[string]int{}
	for _, rq := range reqs {
		perDelivery[rq.booking]++
	}
	var probes, probeDeliveries int
	for _, n := range perDelivery {
		if n > 2 {
			probes += n
			probeDeliveries++
		}
	}
	t.Logf("outage: %d requests for %d deliveries, %d of them probes of %d deliveries", len(reqs), len(perDelivery), probes, probeDeliveries)
	assert.LessOrEqual(t, len(reqs), n*2/5, "the outage cost at most the attempts in flight and the probes")
	// Probes go one at a time, at least the schedule's shortest wait apart.
	assert.LessOrEqual(t, probes, int(probing/(50*time.Millisecond))+10)
	assert.LessOrEqual(t, probeDeliveries, 3, "one probe delivery (a few when the breaker opened)")

	eventually(t, 2*time.Minute, "the backlog to drain", func() bool {
		return len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) == n
	})
	assert.Empty(t, deliveriesIn(t, r, ep.ID, relay.StateDead))
	var ok []time.Time
	seen := map[string]int{}
	for _, rq := range rc.requests() {
		if rq.status/100 == 2 {
			ok = append(ok, rq.at)
			seen[rq.booking]++
		}
	}
	assert.Len(t, seen, n)
	for b, n := range seen {
		assert.Equalf(t, 1, n, "%s accepted %d times", b, n)
	}
	// No faster than the rate: the k-th acceptance comes at least k-1 send slots after the first.
	step := time.Duration(float64(time.Second) / rate)
	for k := 1; k < len(ok); k++ {
		require.GreaterOrEqualf(t, ok[k].Sub(ok[0]), time.Duration(k-1)*step-20*time.Millisecond, "acceptance %d", k)
	}
}

func ptr[T any](v T) *T { return &v }

// An endpoint failing for longer than its disable-after is disabled with an alert; its events keep
// accruing as paused deliveries, and enable --send-missed delivers all of them, each booking in order.
func TestSustainedFailureDisablesThenSendMissedDeliversInOrder(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	e := newEnv(t)
	alertSecret := relay.NewSecret()
	sink := newAlertSink(t, alertSecret)
	// More attempts than the breaker's threshold: a delivery's own failures open the breaker before its
	// schedule runs out, so none can die before the breaker holds it, however the rounds of the other
	// deliveries interleave (with four attempts one did, under load, while the others' were recorded).
	schedule := []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
		200 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond}
	require.Greater(t, len(schedule), relay.DefaultBreakerFailures)
	r := e.startRelay(t, relayOpts{schedule: schedule, alerts: relay.AlertConfig{URL: sink.srv.URL, Secret: alertSecret}})
	rc := newVersionReceiver(t)
	var mu sync.Mutex
	down := true
	rc.setAnswer(func(string, uint64) int {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return http.StatusBadGateway
		}
		return http.StatusOK
	})
	ep := orderedEndpoint(t, r, rc.srv.URL, relay.SettingsUpdate{DisableAfter: ptr(time.Second)})
	assert.Equal(t, relay.DefaultBreakerFailures, ep.BreakerFailures)
	events := map[string][]booking.Event{}
	var bookings []string
	for i := range 4 {
		b := fmt.Sprintf("calendly-early-%d", i)
		bookings = append(bookings, b)
		events[b] = e.fiveEvents(b)
	}
	e.recordShuffled(t, rng, events)
	eventually(t, time.Minute, "the relay to disable the endpoint", func() bool {
		got, err := r.Endpoint(context.Background(), ep.ID)
		require.NoError(t, err)
		return got.Disabled && got.AutoDisabled
	})
	eventually(t, 30*time.Second, "the disabled alert", func() bool {
		for _, a := range sink.got() {
			if a.Type == "endpoint.disabled" {
				return true
			}
		}
		return false
	})
	later := map[string][]booking.Event{}
	for i := range 3 {
		b := fmt.Sprintf("calendly-late-%d", i)
		bookings = append(bookings, b)
		later[b] = e.fiveEvents(b)
	}
	e.recordShuffled(t, rng, later)
	logged := time.Now()
	eventually(t, time.Minute, "every delivery to wait paused", func() bool {
		if n := len(deliveriesIn(t, r, ep.ID, relay.StatePaused)); n != 35 {
			if time.Since(logged) >= time.Second { // what it waits for, once a second
				logged = time.Now()
				rows, _ := e.pool.Query(context.Background(), `SELECT state || coalesce(held, '') || ' ' || count(*) FROM relay_deliveries GROUP BY state, held`)
				st, _ := pgx.CollectRows(rows, pgx.RowTo[string])
				t.Logf("paused %d: %v", n, st)
			}
			return false
		}
		return true
	})
	assert.Empty(t, deliveriesIn(t, r, ep.ID, relay.StateDead), "nothing ran out of attempts during the outage")
	mu.Lock()
	down = false
	mu.Unlock()
	before := len(rc.requests())
	got, n, err := r.EnableAndSendMissed(context.Background(), ep.ID)
	require.NoError(t, err)
	assert.False(t, got.Disabled)
	assert.Equal(t, 35, n)
	eventually(t, time.Minute, "every missed delivery", func() bool {
		return len(deliveriesIn(t, r, ep.ID, relay.StateSucceeded)) == 35
	})
	assertInOrder(t, rc.requests()[before:], bookings, 5)
}

// A plain enable of an endpoint the relay disabled after a sustained failure does not flood it with
// the missed days: the paused deliveries end dead ("skipped"), and the booking's next message names
// them in skipped_versions.
func TestPlainEnableAfterSustainedFailureSkipsTheMissed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	schedule := []time.Duration{0}
	for range 40 {
		schedule = append(schedule, 100*time.Millisecond) // longer than disable-after: nothing dies first
	}
	r := e.startRelay(t, relayOpts{schedule: schedule})
	rc := newVersionReceiver(t)
	var mu sync.Mutex
	down := true
	rc.setAnswer(func(string, uint64) int {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	ep := orderedEndpoint(t, r, rc.srv.URL, relay.SettingsUpdate{DisableAfter: ptr(time.Second), BreakerFailures: ptr(2)})
	const b = "calendly-missed"
	events := e.fiveEvents(b)
	e.record(t, "missed", events[:3]...)
	eventually(t, time.Minute, "the relay to disable the endpoint", func() bool {
		got, err := r.Endpoint(context.Background(), ep.ID)
		require.NoError(t, err)
		return got.AutoDisabled && len(deliveriesIn(t, r, ep.ID, relay.StatePaused)) == 3
	})
	mu.Lock()
	down = false
	mu.Unlock()
	_, n, err := r.EnableEndpoint(context.Background(), ep.ID)
	require.NoError(t, err)
	assert.Zero(t, n)
	dead := deliveriesIn(t, r, ep.ID, relay.StateDead)
	require.Len(t, dead, 3)
	for _, d := range dead {
		assert.Equal(t, relay.SkippedOnEnable, d.LastError)
	}
	e.record(t, "after", events[3])
	eventually(t, time.Minute, "version 4", func() bool { return len(rc.accepted()[b]) == 1 })
	var got []uint64
	for _, rq := range rc.requests() {
		if rq.status/100 == 2 {
			got = rq.skipped
		}
	}
	assert.Equal(t, []uint64{1, 2, 3}, got)
}
