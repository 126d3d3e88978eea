package relay_test

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/esdb"
	"bookingledger/adapters/esdb/esdbtest"
	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/eventlogtest"
	"bookingledger/adapters/jobs"
	"bookingledger/adapters/jobs/jobstest"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/standard"
	"bookingledger/adapters/relay"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
)

// TestMain runs up to 8 of the package's tests at once unless -parallel says otherwise (go test's
// default is GOMAXPROCS, 2 on CI's machine): they mostly wait — for receivers, retry schedules and
// River's scheduled jobs — and each has a database, receivers and registries of its own.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", "8"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	code := m.Run()
	if err := spares.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = cmp.Or(code, 1)
	}
	os.Exit(code)
}

var testNamespace = uuid.MustParse("0b7e3c55-2f7d-4d7e-9a31-5e2b7c9d1a40")

// day is when the test bookings take place.
var day = time.Date(2027, 3, 15, 0, 0, 0, 0, time.UTC)

// shortSchedule keeps retries in tests to milliseconds.
var shortSchedule = []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond,
	200 * time.Millisecond, 250 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}

// env is one database with the selected event store, the ledger and a relay whose projection and
// workers run.
type env struct {
	pool   *pgxpool.Pool
	store  eventlog.Store
	ledger *ledger.Service
	esdb   *esdbtest.Server
}

// envSlots bounds the envs that exist at once, whatever -parallel says: each is a database, River
// clients polling it, a projection and receivers, and more of them at once than this only slowed every
// one of them down on two loaded cores (CI runs -parallel 8, and the EventStoreDB pass beside this one).
var envSlots = make(chan struct{}, 4)

// spares are the package's test databases, River's tables in them: a test that passed gives its
// database back emptied, with its pool's warm connections, to the next (see pgtest.Spares). There are
// at most cap(envSlots) of them.
var spares = pgtest.Spares{Extra: jobstest.Template}

func newEnv(t testing.TB) *env {
	t.Helper()
	envSlots <- struct{}{}
	t.Cleanup(func() { <-envSlots }) // after the env's own cleanups: they run in reverse order
	pool := spares.Database(t)       // given back after the relays, receivers and stores of the test stopped
	e := &env{pool: pool}
	if eventlogtest.SelectedStore(t) == eventlogtest.StoreESDB {
		e.esdb = esdbtest.New(t)
	}
	var ls ledger.Store
	e.store, ls = e.open(t, pool)
	e.ledger = ledger.NewService(ls, eventcodec.JSON{})
	return e
}

// open returns a new client of the event store, as a separate process has.
func (e *env) open(t testing.TB, pool *pgxpool.Pool) (interface {
	eventlog.Store
	eventlog.Subscriber
}, ledger.Store) {
	t.Helper()
	pg := postgres.NewStore(pool)
	if e.esdb == nil {
		return pg, pg
	}
	ctx, cancel := context.WithTimeout(context.Background(), slack*20*time.Second)
	defer cancel()
	es, err := esdb.Open(ctx, e.esdb.ConnString())
	require.NoError(t, err)
	t.Cleanup(es.Close)
	return es, esdb.NewLedgerStore(es, pg)
}

type relayOpts struct {
	schedule []time.Duration
	alerts   relay.AlertConfig
	guard    relay.Guard
	// noProjection starts only workers (a second process whose runner stands by).
	noProjection bool
	registry     *prometheus.Registry
	workers      int
	// replayPage is the events a window replay reads at a time (0: the default).
	replayPage int
	// attemptTimeout and jobTimeout override the relay's and the queue's defaults.
	attemptTimeout, jobTimeout time.Duration
}

// startRelay builds a relay on e and runs its workers (and, unless told otherwise, its projection)
// until the test ends. Every call is another "process".
func (e *env) startRelay(t testing.TB, o relayOpts) *relay.Relay {
	t.Helper()
	if o.schedule == nil {
		o.schedule = shortSchedule
	}
	if o.workers == 0 {
		o.workers = 4
	}
	if o.registry == nil {
		o.registry = prometheus.NewRegistry()
	}
	if !o.guard.AllowPrivate && o.guard.Resolver == nil {
		o.guard.AllowPrivate = true
	}
	store, _ := e.open(t, e.pool)
	r, err := relay.New(relay.Config{Pool: e.pool, Events: store, Codec: eventcodec.JSON{}, Guard: o.guard,
		Schedule: o.schedule, Jitter: -1, Alerts: o.alerts, Metrics: relay.NewMetrics(o.registry, e.pool), Workers: o.workers,
		AttemptTimeout: o.attemptTimeout, ReplayPage: o.replayPage})
	require.NoError(t, err)
	kinds, err := r.Kinds()
	require.NoError(t, err)
	// River wakes its producers on every insert (LISTEN/NOTIFY) and fetches again whenever a worker
	// frees up; its poll only catches an insert whose notification the cooldown swallowed. Every 50 ms
	// for each of the client's three queues, it was a third of the test binary's CPU and a tenth of
	// the server's.
	q, err := jobs.New(jobs.Config{Pool: e.pool, Ledger: e.ledger, Kinds: kinds, PollInterval: 200 * time.Millisecond,
		StopTimeout: 5 * time.Second, JobTimeout: o.jobTimeout})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, q.Start(ctx))
	done := make(chan struct{})
	if o.noProjection {
		close(done)
	} else {
		proj, err := r.Projection()
		require.NoError(t, err)
		runner := projections.NewRunner(store, proj, checkpoint.NewLocker(e.pool), projections.RunnerOptions{Subscriber: store,
			PollInterval: 20 * time.Millisecond, StandbyInterval: 100 * time.Millisecond, RetryInterval: 50 * time.Millisecond})
		go func() { defer close(done); _ = runner.Run(ctx) }()
	}
	t.Cleanup(func() {
		cancel()
		<-done
		_ = q.Stop(context.Background())
	})
	return r
}

func (e *env) eid(parts ...string) eventlog.EventID {
	return eventlog.EventID(uuid.NewSHA1(testNamespace, []byte(strings.Join(parts, " "))))
}

// scheduled is a create of booking b at hour h of day.
func (e *env) scheduled(b string, h int) booking.Event {
	start := day.Add(time.Duration(h) * time.Hour)
	return booking.Event{ID: e.eid(b, "scheduled"), Booking: booking.ID(b), Provider: "calendly", ProviderRef: b + " scheduled",
		OccurredAt: day.Add(-48 * time.Hour), Payload: booking.Scheduled{Slot: booking.Slot{Meeting: "m-" + b,
			Resources: []string{"host-1"}, Start: start, End: start.Add(30 * time.Minute)}}}
}

func (e *env) canceled(b string) booking.Event {
	return booking.Event{ID: e.eid(b, "canceled"), Booking: booking.ID(b), Provider: "calendly", ProviderRef: b + " canceled",
		OccurredAt: day.Add(-24 * time.Hour), Payload: booking.Canceled{Reason: "no longer needed"}}
}

func (e *env) noShow(b string) booking.Event {
	return booking.Event{ID: e.eid(b, "no_show"), Booking: booking.ID(b), Provider: "calendly", ProviderRef: b + " no show",
		OccurredAt: day.Add(time.Hour), Payload: booking.NoShowMarked{}}
}

// record records one delivery of events, as the ingress would.
func (e *env) record(t testing.TB, deliveryID string, events ...booking.Event) ledger.Result {
	t.Helper()
	res, err := e.tryRecord(deliveryID, events...)
	require.NoError(t, err)
	return res
}

// tryRecord is record for goroutines other than the test's.
func (e *env) tryRecord(deliveryID string, events ...booking.Event) (ledger.Result, error) {
	return e.ledger.Record(context.Background(), ledger.Delivery{
		Receipt: ledger.Receipt{Provider: "calendly", ReceivedAt: time.Now(), DeliveryID: deliveryID, Secret: "0:3f2a9c",
			Body: []byte(`{"delivery":"` + deliveryID + `"}`)},
		Events: events,
	})
}

// recorders is how many deliveries recordCreates and recordShuffled record at once: a delivery is a
// few round trips to the stores (more on EventStoreDB), which one at a time made most of a test's time.
const recorders = 4

// recordConcurrently runs the recorders lanes, each recording its deliveries in its order, and fails
// the test with the first error.
func recordConcurrently(t testing.TB, lanes [recorders]func() error) {
	t.Helper()
	errs := make([]error, recorders)
	var wg sync.WaitGroup
	for i, lane := range lanes {
		wg.Go(func() { errs[i] = lane() })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// recordCreates records n bookings' creates, prefix-0 … prefix-(n-1), spread over hours hours of day,
// one delivery each, several at a time.
func (e *env) recordCreates(t testing.TB, prefix string, n, hours int) {
	t.Helper()
	var lanes [recorders]func() error
	for l := range lanes {
		lanes[l] = func() error {
			for i := l; i < n; i += recorders {
				b := fmt.Sprintf("%s-%d", prefix, i)
				if _, err := e.tryRecord(b, e.scheduled(b, i%hours)); err != nil {
					return fmt.Errorf("record %s: %w", b, err)
				}
			}
			return nil
		}
	}
	recordConcurrently(t, lanes)
}

// recordCreatesAtOnce records the same creates as recordCreates in one delivery, so one transaction:
// a projection reads them in one batch whatever other transactions the cluster has open (the log is
// read below the oldest running one), where separate deliveries may be read in several.
func (e *env) recordCreatesAtOnce(t testing.TB, prefix string, n, hours int) {
	t.Helper()
	events := make([]booking.Event, n)
	for i := range n {
		b := fmt.Sprintf("%s-%d", prefix, i)
		events[i] = e.scheduled(b, i%hours)
	}
	e.record(t, prefix, events...)
}

// waitForLog waits until the event log returns at least n events. On PostgreSQL the log returns an
// event only once every transaction older than its own has ended anywhere in the cluster, and the
// tests beside this one (creating and dropping their databases among them) hold such transactions,
// for seconds under load: a replay or its dry run reads the log, so a test that records events and
// then replays them waits for them here rather than expecting them at once.
func (e *env) waitForLog(t *testing.T, n int) {
	t.Helper()
	eventually(t, time.Minute, fmt.Sprintf("%d events readable from the log", n), func() bool {
		var (
			from eventlog.Position
			seen int
		)
		for {
			evs, err := e.store.ReadAll(context.Background(), from, 1000)
			require.NoError(t, err)
			seen += len(evs)
			if len(evs) < 1000 || seen >= n {
				return seen >= n
			}
			from = evs[len(evs)-1].Position
		}
	})
}

// received is one message a receiver accepted.
type received struct {
	id     string
	header http.Header
	body   []byte
	msg    relay.Message
}

// receiver is a real HTTP server that verifies every message with the project's Standard Webhooks
// verifier and answers what answer says (nil: 204).
type receiver struct {
	t      testing.TB
	srv    *httptest.Server
	verify *standard.Provider

	mu       sync.Mutex
	got      []received
	requests int
	invalid  []string
	answer   func(n int) int // status for the n-th request (1-based)
}

func newReceiver(t testing.TB, secrets ...string) *receiver {
	t.Helper()
	rc := &receiver{t: t}
	rc.setSecrets(secrets...)
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

// endpointOn adds an endpoint of every event type on r that delivers to rc, and has rc verify with
// its signing secret.
func (rc *receiver) endpointOn(t testing.TB, r *relay.Relay) relay.Endpoint {
	t.Helper()
	ep, secret, err := r.AddEndpoint(context.Background(), relay.NewEndpoint{URL: rc.url()})
	require.NoError(t, err)
	rc.setSecrets(secret)
	return ep
}

func (rc *receiver) setSecrets(secrets ...string) {
	p, err := standard.New(providers.NewSecrets(secrets...), 0)
	require.NoError(rc.t, err)
	rc.mu.Lock()
	rc.verify = p
	rc.mu.Unlock()
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.requests++
	status := http.StatusNoContent
	if rc.answer != nil {
		status = rc.answer(rc.requests)
	}
	if status/100 != 2 {
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, "failing on purpose (%d)", status)
		return
	}
	if rc.verify != nil {
		if _, err := rc.verify.Verify(r.Header, body, time.Now()); err != nil {
			rc.invalid = append(rc.invalid, err.Error())
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	}
	var m relay.Message
	if err := json.Unmarshal(body, &m); err != nil {
		rc.invalid = append(rc.invalid, "body: "+err.Error())
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.got = append(rc.got, received{id: r.Header.Get("webhook-id"), header: r.Header.Clone(), body: body, msg: m})
	w.WriteHeader(status)
}

func (rc *receiver) setAnswer(f func(n int) int) {
	rc.mu.Lock()
	rc.answer = f
	rc.mu.Unlock()
}

func (rc *receiver) messages() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

func (rc *receiver) requestCount() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.requests
}

func (rc *receiver) invalidMessages() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.invalid...)
}

// ids counts the received messages by webhook-id.
func (rc *receiver) ids() map[string]int {
	out := map[string]int{}
	for _, m := range rc.messages() {
		out[m.id]++
	}
	return out
}

func (rc *receiver) url() string { return rc.srv.URL + "/hook" }

// slack stretches the package's waits for a condition: they bound a failure, never the time a test
// claims anything takes, and a loaded machine running tests beside each other stretches everything.
const slack = 3

// eventually polls cond until it holds or the deadline (within, stretched by slack) passes. The
// wait between two polls starts at 10 ms and doubles up to 100 ms: most conditions query the
// database, and polling every 20 ms for the seconds a delivery course takes was a good part of what
// the package's tests cost the server (and, under -race, themselves), for conditions that, once
// true, stay true.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	within *= slack
	deadline := time.Now().Add(within)
	wait := 10 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// deliveriesIn returns the endpoint's deliveries by state.
func deliveriesIn(t *testing.T, r *relay.Relay, endpoint int64, state string) []relay.Delivery {
	t.Helper()
	ds, err := r.Deliveries(context.Background(), relay.DeliveryQuery{EndpointID: endpoint, State: state, Limit: 10000})
	require.NoError(t, err)
	return ds
}

// downAddr returns a loopback address that refuses connections until up is called, and up, which
// frees it for a listener. Its port stays bound, without listening, until then: freed at once (as it
// was), the port could be handed to another test's receiver in the seconds before up, which then
// answered this test's deliveries (a 401 where a refused connection was expected).
func downAddr(t *testing.T) (addr string, up func()) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	var once sync.Once
	up = func() { once.Do(func() { _ = syscall.Close(fd) }) }
	t.Cleanup(up)
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	in4, ok := sa.(*syscall.SockaddrInet4)
	require.True(t, ok, "a bound IPv4 socket's name")
	return fmt.Sprintf("127.0.0.1:%d", in4.Port), up
}

func providersSecrets(s ...string) providers.Secrets { return providers.NewSecrets(s...) }
