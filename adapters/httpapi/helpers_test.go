package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calcom"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providers/standard"
	"bookingledger/adapters/providers/stripe"
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

type testServer struct {
	URL      string
	DBURL    string
	Pool     *pgxpool.Pool
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

// newServer starts the ingress over a fresh, migrated database behind a real HTTP server.
func newServer(t *testing.T, opts ...serverOption) *testServer {
	t.Helper()
	dbURL := pgtest.NewDatabaseURL(t)
	pool := pgtest.Open(t, dbURL)
	ts := &testServer{
		DBURL:    dbURL,
		Pool:     pool,
		Registry: prometheus.NewRegistry(),
		Clock:    &fakeClock{now: time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)},
		Logs:     &syncBuffer{},
	}
	cfg := httpapi.Config{
		Ledger: ledger.NewService(postgres.NewStore(pool), eventcodec.JSON{}),
		Providers: []providers.Provider{
			calendly.New(providers.NewSecrets(calendlyKey), 0),
			calcom.New(providers.NewSecrets(calcomSecret)),
			stripe.New(providers.NewSecrets(stripeSecret), 0),
			mustStandard(t, standardSecret),
		},
		Ready: httpapi.CheckFunc(func(ctx context.Context) error {
			_, err := postgres.Pending(ctx, pool)
			return err
		}),
		Logger:                  slog.New(slog.NewJSONHandler(ts.Logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registry:                ts.Registry,
		Clock:                   ts.Clock.Now,
		RejectReceiptsPerMinute: 100,
		RecordTimeout:           5 * time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := httpapi.New(cfg)
	require.NoError(t, err)
	ts.Server = srv
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	ts.URL = hs.URL
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

func (ts *testServer) events(t *testing.T) int {
	t.Helper()
	return ts.count(t, `SELECT count(*) FROM events`)
}

func (ts *testServer) receipts(t *testing.T, outcome string) int {
	t.Helper()
	return ts.count(t, `SELECT count(*) FROM receipts WHERE outcome = $1`, outcome)
}

// metric reads one counter sample from the server's registry.
func (ts *testServer) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := ts.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// scrape returns the /metrics text.
func (ts *testServer) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(ts.URL + "/metrics")
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
