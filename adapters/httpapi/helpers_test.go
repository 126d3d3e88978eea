package httpapi_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/esdb"
	"bookingledger/adapters/esdb/esdbtest"
	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/eventlogtest"
	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/jobs/jobstest"
	"bookingledger/adapters/metricstest"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calcom"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providers/standard"
	"bookingledger/adapters/providers/stripe"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

const (
	calendlyKey  = "test-calendly-signing-key"
	calcomSecret = "test-calcom-secret"
	stripeSecret = "whsec_test_stripe_secret"
	// A Standard Webhooks secret is base64 after whsec_.
	standardSecret = "whsec_dGVzdC1zdGFuZGFyZC13ZWJob29rcy1zZWNyZXQ="
)

// fakeClock is the server's clock in tests: signatures and token buckets see the time the test sets.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// syncBuffer collects the server's logs; handlers write from many goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stores is the selected event store of one test, with the ledger.Store serve would build on it.
type stores struct {
	Kind   string
	Events eventlog.Store
	Ledger ledger.Store
	ESDB   *esdbtest.Server // nil on PostgreSQL
	// Receipts is PostgreSQL's receipts store, on either event store.
	Receipts *postgres.Store
	// ping is the event store's own readiness check (nil on PostgreSQL, whose pool readiness covers).
	ping func(context.Context) error
}

// newStores opens the selected event store. Receipts go to pool in both cases: in one transaction
// with the events on PostgreSQL, after the append on EventStoreDB.
func newStores(t testing.TB, pool *pgxpool.Pool) *stores {
	t.Helper()
	pg := postgres.NewStore(pool)
	if eventlogtest.SelectedStore(t) == eventlogtest.StorePostgres {
		return &stores{Kind: eventlogtest.StorePostgres, Events: pg, Ledger: pg, Receipts: pg}
	}
	srv := esdbtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	es, err := esdb.Open(ctx, srv.ConnString())
	require.NoError(t, err, "open the esdb test server")
	t.Cleanup(es.Close)
	return &stores{Kind: eventlogtest.StoreESDB, Events: es, Ledger: esdb.NewLedgerStore(es, pg), ESDB: srv, Receipts: pg, ping: es.Ping}
}

type testServer struct {
	URL      string // the public surface
	AdminURL string // the admin surface (/metrics)
	DBURL    string
	Pool     *pgxpool.Pool
	Stores   *stores
	Server   *httpapi.Server
	Registry *prometheus.Registry
	Clock    *fakeClock
	Logs     *syncBuffer
}

type serverOption func(*httpapi.Config)

func withProviders(ps ...providers.Provider) serverOption {
	return func(c *httpapi.Config) { c.Providers = ps }
}

func withRejectReceipts(perMinute int) serverOption {
	return func(c *httpapi.Config) { c.RejectReceiptsPerMinute = perMinute }
}

func withMaxBody(n int64) serverOption {
	return func(c *httpapi.Config) { c.MaxBodyBytes = n }
}

// TestMain drops the package's spare databases once its tests have run.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, s := range []*pgtest.Spares{&spares, &riverSpares} {
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = cmp.Or(code, 1)
		}
	}
	os.Exit(code)
}

// spares are the package's test databases (see pgtest.Spares): a test that passed gives its database
// back emptied, with its pool's warm connections, to the next. riverSpares have River's tables too,
// for the tests whose ledger can defer a delivery to a job.
var (
	spares      pgtest.Spares
	riverSpares = pgtest.Spares{Extra: jobstest.Template}
)

// newServer starts the ingress over an empty, migrated database and the selected event store, behind a
// real HTTP server.
func newServer(t *testing.T, opts ...serverOption) *testServer {
	t.Helper()
	return newServerOn(t, spares.Database(t), opts...)
}

// ownPool is a database whose pool the test may close, as storeDown does on PostgreSQL: a fresh one
// there (a spare's pool is not the test's to close), a spare on EventStoreDB, where storeDown stops
// the node instead.
func ownPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	if eventlogtest.SelectedStore(t) == eventlogtest.StorePostgres {
		return pgtest.NewDatabase(t)
	}
	return spares.Database(t)
}

// newServerOn is newServer over pool's database.
func newServerOn(t *testing.T, pool *pgxpool.Pool, opts ...serverOption) *testServer {
	t.Helper()
	st := newStores(t, pool)
	ts := &testServer{
		DBURL:    pool.Config().ConnString(),
		Pool:     pool,
		Stores:   st,
		Registry: prometheus.NewRegistry(),
		Clock:    &fakeClock{now: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)},
		Logs:     &syncBuffer{},
	}
	cfg := httpapi.Config{
		// As serve builds it: free text kept apart from the events.
		Ledger: ledger.NewService(st.Ledger, eventcodec.JSON{}),
		Providers: []providers.Provider{
			calendly.New(providers.NewSecrets(calendlyKey), 0),
			calcom.New(providers.NewSecrets(calcomSecret)),
			stripe.New(providers.NewSecrets(stripeSecret), 0),
			mustStandard(t, standardSecret),
		},
		// As serve checks it: the database, and the event store when it is another system.
		Ready: httpapi.CheckFunc(func(ctx context.Context) error {
			if _, err := postgres.Pending(ctx, pool); err != nil {
				return err
			}
			if st.ping != nil {
				return st.ping(ctx)
			}
			return nil
		}),
		Logger:                  slog.New(slog.NewJSONHandler(ts.Logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registry:                ts.Registry,
		Clock:                   ts.Clock.Now,
		RejectReceiptsPerMinute: 100,
		RecordTimeout:           recordTimeout,
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := httpapi.New(cfg)
	require.NoError(t, err)
	ts.Server = srv
	ts.listen(t)
	return ts
}

func mustStandard(t *testing.T, secrets ...string) *standard.Provider {
	t.Helper()
	p, err := standard.New(providers.NewSecrets(secrets...), 0)
	require.NoError(t, err)
	return p
}

// calendlyDelivery builds a signed Calendly sample at the server's current time.
func (ts *testServer) calendlyDelivery(t *testing.T, event, bookingKey string) sample.Delivery {
	t.Helper()
	d, err := sample.Build("calendly", event, calendlyKey, sample.Params{Booking: bookingKey}, ts.Clock.Now())
	require.NoError(t, err)
	return d
}

// calcomDelivery builds a signed Cal.com sample.
func (ts *testServer) calcomDelivery(t *testing.T, trigger, uid string) sample.Delivery {
	t.Helper()
	d, err := sample.Build("calcom", trigger, calcomSecret, sample.Params{Booking: uid}, ts.Clock.Now())
	require.NoError(t, err)
	return d
}

type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r reply) JSON(t *testing.T) map[string]string {
	t.Helper()
	var m map[string]string
	require.NoError(t, json.Unmarshal(r.Body, &m), "body %s", r.Body)
	return m
}

func (ts *testServer) post(t *testing.T, provider string, header http.Header, body []byte) reply {
	t.Helper()
	r, err := postTo(context.Background(), http.DefaultClient, ts.URL, provider, header, body)
	require.NoError(t, err)
	return r
}

func (ts *testServer) send(t *testing.T, d sample.Delivery) reply {
	t.Helper()
	return ts.post(t, d.Provider, d.Header, d.Body)
}

func postTo(ctx context.Context, client *http.Client, baseURL, provider string, header http.Header, body []byte) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/webhooks/"+provider, bytes.NewReader(body))
	if err != nil {
		return reply{}, err
	}
	req.Header = header.Clone()
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

func (ts *testServer) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, ts.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// storeDown takes the event store away from the running server: on PostgreSQL its pool (events and
// receipts share it; the server must be on ownPool's), on EventStoreDB the node.
func (ts *testServer) storeDown(t *testing.T) {
	t.Helper()
	if ts.Stores.ESDB != nil {
		ts.Stores.ESDB.Stop()
		return
	}
	ts.Pool.Close()
}

// storeUp brings the store back for the test's own checks: a new pool on the same database, or the
// node restarted with its data.
func (ts *testServer) storeUp(t *testing.T) {
	t.Helper()
	if ts.Stores.ESDB != nil {
		require.NoError(t, ts.Stores.ESDB.Restart())
		return
	}
	ts.Pool = pgtest.Open(t, ts.DBURL)
	pg := postgres.NewStore(ts.Pool)
	ts.Stores.Events, ts.Stores.Ledger = pg, pg
}

// allEvents reads the whole global log through the event-store port, booking streams only.
func (ts *testServer) allEvents(t *testing.T) []eventlog.RecordedEvent {
	t.Helper()
	ctx := context.Background()
	ts.settleLog(t)
	const page = 1000
	var all []eventlog.RecordedEvent
	var from eventlog.Position
	for {
		evs, err := ts.Stores.Events.ReadAll(ctx, from, page)
		require.NoError(t, err)
		for _, e := range evs {
			if strings.HasPrefix(e.StreamID, "booking-") {
				all = append(all, e)
			}
		}
		if len(evs) < page {
			return all
		}
		from = evs[len(evs)-1].Position
	}
}

// settleLog waits until ReadAll shows every event committed before the call. PostgreSQL's ReadAll
// holds back rows of transactions younger than the oldest one still running anywhere in the cluster
// (other tests' included): once the cluster's xmin has passed an xid taken now, every earlier commit
// is readable. EventStoreDB acknowledges an append only once it is in $all, so there is nothing to wait for.
func (ts *testServer) settleLog(t *testing.T) {
	t.Helper()
	if ts.Stores.Kind != eventlogtest.StorePostgres {
		return
	}
	ctx := context.Background()
	var now string
	require.NoError(t, ts.Pool.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&now))
	require.Eventually(t, func() bool {
		var passed bool
		require.NoError(t, ts.Pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot()) > $1::xid8`, now).Scan(&passed))
		return passed
	}, time.Minute, 5*time.Millisecond, "a transaction older than xid %s is still running", now)
}

// events counts the stored booking events, through the event store.
func (ts *testServer) events(t *testing.T) int {
	t.Helper()
	return len(ts.allEvents(t))
}

// eventsWithID counts stored events with the event ID id (a canonical UUID), in every stream.
func (ts *testServer) eventsWithID(t *testing.T, id string) int {
	t.Helper()
	want, err := eventlog.ParseEventID(id)
	require.NoError(t, err)
	n := 0
	for _, e := range ts.allEvents(t) {
		if e.ID == want {
			n++
		}
	}
	return n
}

// stream reads one stream through the event store.
func (ts *testServer) stream(t *testing.T, name string) []eventlog.RecordedEvent {
	t.Helper()
	evs, err := ts.Stores.Events.ReadStream(context.Background(), name)
	require.NoError(t, err)
	return evs
}

// streamTypes lists a stream's event types in version order.
func (ts *testServer) streamTypes(t *testing.T, name string) []string {
	t.Helper()
	var types []string
	for _, e := range ts.stream(t, name) {
		types = append(types, e.Type)
	}
	return types
}

func (ts *testServer) receipts(t *testing.T, outcome string) int {
	t.Helper()
	return ts.count(t, `SELECT count(*) FROM receipts WHERE outcome = $1`, outcome)
}

// metric reads what the server's registry counted for name with labels (metricstest.Sum).
func (ts *testServer) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	return metricstest.Sum(t, ts.Registry, name, labels)
}

// listen serves ts.Server's public and admin surfaces on their own test listeners.
func (ts *testServer) listen(t *testing.T) {
	t.Helper()
	hs := httptest.NewServer(ts.Server.Handler())
	t.Cleanup(hs.Close)
	admin := httptest.NewServer(ts.Server.AdminHandler())
	t.Cleanup(admin.Close)
	ts.URL, ts.AdminURL = hs.URL, admin.URL
}

// scrape returns the /metrics text.
func (ts *testServer) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(ts.AdminURL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return string(b)
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func contains(haystack string, needles ...string) []string {
	var found []string
	for _, n := range needles {
		if strings.Contains(haystack, n) {
			found = append(found, n)
		}
	}
	return found
}

// parallel runs the test in parallel with the others, on either store: each owns its database and, on
// EventStoreDB, its in-process node. They once ran one at a time on EventStoreDB because eight at once
// answered deliveries past a record timeout of 5 s at load 45; the timeout is recordTimeout now.
func parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// recordTimeout bounds one Record in the tests' servers. No test waits for it to pass (a store that
// is down fails fast on both stores); it is only a bound on a stuck store. It is generous because a
// loaded machine is slow, not stuck: on EventStoreDB twenty concurrent copies of one delivery queue on
// the adapter's lock of their stream, each copy a few round trips to the node, and that took more
// than 5 s at load 36 with the package's tests in parallel.
const recordTimeout = 30 * time.Second
