package httpapi_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/providers"
	"bookingledger/domain/ledger"
)

// stubProvider accepts everything (or fails as told) and maps every body to "ignored"; it can hold Map
// until released, to catch a request in flight.
type stubProvider struct {
	name      string
	verifyErr error
	mapErr    error
	entered   chan struct{} // closed by the first Map call, when set
	release   chan struct{} // Map waits for it, when set
	mapped    int32
}

func (p *stubProvider) Name() string { return p.name }

func (p *stubProvider) Verify(http.Header, []byte, time.Time) (providers.Verified, error) {
	if p.verifyErr != nil {
		return providers.Verified{}, p.verifyErr
	}
	return providers.Verified{SecretIndex: 0}, nil
}

func (p *stubProvider) Map(ctx context.Context, _ http.Header, _ []byte, _ time.Time) (providers.Mapped, error) {
	if atomic.AddInt32(&p.mapped, 1) == 1 && p.entered != nil {
		close(p.entered)
	}
	if p.release != nil {
		<-p.release
	}
	if p.mapErr != nil {
		return providers.Mapped{}, p.mapErr
	}
	return providers.Mapped{DeliveryID: "stub-1", Reason: "stub event not mapped"}, nil
}

func TestServeDrainsInFlightRequestsOnShutdown(t *testing.T) {
	pool := spares.Database(t)
	slow := &stubProvider{name: "slow", entered: make(chan struct{}), release: make(chan struct{})}
	srv, err := httpapi.New(httpapi.Config{
		Ledger:       ledger.NewService(newStores(t, pool).Ledger, eventcodec.JSON{}),
		Providers:    []providers.Provider{slow},
		Ready:        httpapi.CheckFunc(func(context.Context) error { return nil }),
		DrainTimeout: 10 * time.Second,
	})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	aln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(ctx, httpapi.Endpoint{Name: "public", Listener: ln},
			httpapi.Endpoint{Name: "admin", Listener: aln, Handler: srv.AdminHandler()})
	}()
	resp, err := http.Get("http://" + aln.Addr().String() + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the admin listener serves")

	type result struct {
		r   reply
		err error
	}
	inflight := make(chan result, 1)
	go func() {
		r, err := postTo(context.Background(), &http.Client{}, base, "slow", header(), []byte(`{"n":1}`))
		inflight <- result{r, err}
	}()
	<-slow.entered
	cancel() // shutdown begins while the delivery is being handled

	// New connections are refused on both listeners once Serve stopped listening.
	for _, l := range []net.Listener{ln, aln} {
		require.Eventually(t, func() bool {
			c, err := net.DialTimeout("tcp", l.Addr().String(), 100*time.Millisecond)
			if err == nil {
				c.Close()
			}
			return err != nil
		}, 5*time.Second, 10*time.Millisecond)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned before the in-flight request finished: %v", err)
	default:
	}

	close(slow.release)
	res := <-inflight
	require.NoError(t, res.err)
	assert.Equal(t, http.StatusOK, res.r.Status, "the in-flight delivery gets its answer: %s", res.r.Body)
	select {
	case err := <-served:
		assert.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after draining")
	}
	var receipts int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM receipts WHERE delivery_id = 'stub-1'`).Scan(&receipts))
	assert.Equal(t, 1, receipts, "the drained delivery was recorded, not cut off")
}

func TestServeGivesUpDrainingAfterTheTimeout(t *testing.T) {
	stuck := &stubProvider{name: "stuck", entered: make(chan struct{}), release: make(chan struct{})}
	defer close(stuck.release)
	srv, err := httpapi.New(httpapi.Config{
		Ledger:       nopLedger{},
		Providers:    []providers.Provider{stuck},
		Ready:        httpapi.CheckFunc(func(context.Context) error { return nil }),
		DrainTimeout: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, httpapi.Endpoint{Listener: ln}) }()
	go func() {
		_, _ = postTo(context.Background(), &http.Client{}, "http://"+ln.Addr().String(), "stuck", header(), []byte(`{}`))
	}()
	<-stuck.entered
	cancel()
	select {
	case err := <-served:
		assert.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Serve waited past its drain timeout")
	}
}

// nopLedger records nothing; for tests that never reach storage.
type nopLedger struct{}

func (nopLedger) Record(context.Context, ledger.Delivery) (ledger.Result, error) {
	return ledger.Result{Outcome: ledger.OutcomeIgnored}, nil
}
func (nopLedger) Reject(context.Context, ledger.Receipt, string) error { return nil }

func TestNewRefusesBadConfig(t *testing.T) {
	parallel(t)
	ok := httpapi.Config{Ledger: nopLedger{}, Ready: httpapi.CheckFunc(func(context.Context) error { return nil })}
	cases := map[string]func(c *httpapi.Config){
		"no ledger":         func(c *httpapi.Config) { c.Ledger = nil },
		"no readiness":      func(c *httpapi.Config) { c.Ready = nil },
		"negative body cap": func(c *httpapi.Config) { c.MaxBodyBytes = -1 },
		"duplicate provider": func(c *httpapi.Config) {
			c.Providers = []providers.Provider{&stubProvider{name: "a"}, &stubProvider{name: "a"}}
		},
		"reserved name": func(c *httpapi.Config) { c.Providers = []providers.Provider{&stubProvider{name: "unknown"}} },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			c := ok
			mutate(&c)
			_, err := httpapi.New(c)
			assert.Error(t, err)
		})
	}
	_, err := httpapi.New(ok)
	assert.NoError(t, err, "the base config is valid, so each case fails for its own reason")
}

func TestAdminRoutesMountOnTheAdminSurfaceOnly(t *testing.T) {
	parallel(t)
	srv, err := httpapi.New(httpapi.Config{
		Ledger: nopLedger{},
		Ready:  httpapi.CheckFunc(func(context.Context) error { return nil }),
		AdminRoutes: func(mux httpapi.Mux) {
			mux.HandleFunc("GET /api/ping", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })
		},
	})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	srv.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/ping", nil))
	assert.Equal(t, http.StatusTeapot, rec.Code)
	assert.Equal(t, []string{"GET /metrics", "GET /api/ping"}, srv.AdminPatterns())
	assert.Equal(t, []string{"POST /webhooks/{provider}", "GET /healthz", "GET /readyz"}, srv.PublicPatterns())
	for _, path := range []string{"/api/ping", "/metrics"} {
		rec = httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		assert.Equal(t, http.StatusNotFound, rec.Code, "%s is not on the public surface", path)
	}
	rec = httptest.NewRecorder()
	srv.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	assert.Equal(t, http.StatusNotFound, rec.Code, "the admin surface serves only admin routes")
}

func TestGuardMetricsWrapsMetrics(t *testing.T) {
	parallel(t)
	srv, err := httpapi.New(httpapi.Config{
		Ledger: nopLedger{},
		Ready:  httpapi.CheckFunc(func(context.Context) error { return nil }),
		GuardMetrics: func(http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
		},
	})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	srv.AdminHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Equal(t, http.StatusUnauthorized, rec.Code)
}
