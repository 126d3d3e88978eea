package httpapi

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"bookingledger/adapters/providers"
	"bookingledger/domain/ledger"
)

// Ledger is what the ingress needs from domain/ledger.Service.
type Ledger interface {
	Record(ctx context.Context, d ledger.Delivery) (ledger.Result, error)
	Reject(ctx context.Context, r ledger.Receipt, reason string) error
}

var _ Ledger = (*ledger.Service)(nil)

// Checker reports whether the server can do its work (database reachable, schema migrated).
type Checker interface {
	Ready(ctx context.Context) error
}

// CheckFunc adapts a function to Checker.
type CheckFunc func(ctx context.Context) error

// Ready calls f.
func (f CheckFunc) Ready(ctx context.Context) error { return f(ctx) }

// NotReady is a failed readiness check whose Reason is what /readyz shows, while its Cause, which
// may name hosts, users or timeouts, goes only to the server's log.
type NotReady struct {
	Reason string
	Cause  error
}

func (e *NotReady) Error() string { return e.Reason }

// Unwrap returns the cause.
func (e *NotReady) Unwrap() error { return e.Cause }

// Defaults of Config.
const (
	DefaultMaxBodyBytes            = 1 << 20
	DefaultRejectReceiptsPerMinute = 60
	DefaultRecordTimeout           = 10 * time.Second
	DefaultRetryAfter              = 5 * time.Second
	DefaultDrainTimeout            = 15 * time.Second
	readyTimeout                   = 2 * time.Second
)

// Connection limits of both listeners. Providers send a webhook's headers in one packet and its body
// right after; a client that trickles them (slowloris) is cut off instead of holding a connection and
// a goroutine for as long as it likes.
const (
	// DefaultReadHeaderTimeout bounds reading a request's headers, for every request of a connection.
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultReadTimeout bounds reading a whole request: a 1 MiB body takes well under a second on any
	// link a provider uses. A body still arriving then is answered 408.
	DefaultReadTimeout = 30 * time.Second
	// minWriteMargin: the write timeout (counted from the end of the headers) leaves the record timeout
	// this much room for reading the body and writing the answer, so a slow commit answers 503 rather
	// than a cut connection.
	minWriteMargin = 20 * time.Second
	// idleTimeout closes keep-alive connections nobody uses; providers reconnect cheaply.
	idleTimeout = 60 * time.Second
	// maxHeaderBytes: the largest provider header set (Stripe with several v1 signatures, Standard
	// Webhooks with rotated secrets) is well under 4 KiB; bearer tokens and cookies on the admin side
	// too. Go's default is 1 MiB.
	maxHeaderBytes = 64 << 10
)

// Mux is where routes are mounted; *http.ServeMux satisfies it.
type Mux interface {
	Handle(pattern string, handler http.Handler)
	HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request))
}

// routeMux is a ServeMux that remembers its patterns, so that tests can enumerate what a surface
// serves (no admin route may answer on the public listener).
type routeMux struct {
	*http.ServeMux
	patterns []string
}

func newRouteMux() *routeMux { return &routeMux{ServeMux: http.NewServeMux()} }

func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.HandleFunc(pattern, h)
}

// ServeHTTP answers what the mux itself would answer in plain text (404, 405) in the JSON error body.
func (m *routeMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	serveWithJSONFallback(m.ServeMux, w, r)
}

// Config holds a server's dependencies and limits.
type Config struct {
	Ledger Ledger
	// Deferrer keeps deliveries whose data could not be fetched yet (providers.ErrDeferred) for
	// background completion; nil answers them 503, for the provider to retry.
	Deferrer Deferrer
	// Providers are served at /webhooks/<Name()>; a name not listed answers 404.
	Providers []providers.Provider
	Ready     Checker
	Logger    *slog.Logger
	// Registry receives the server's metrics and is what /metrics serves. Nil means a fresh registry;
	// never the global one, so that two servers in one process (tests) do not collide.
	Registry *prometheus.Registry
	// Clock is the time of reception and of signature checks; nil means time.Now.
	Clock func() time.Time
	// MaxBodyBytes caps request bodies (413 beyond it); zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// RejectReceiptsPerMinute bounds rejected-receipt rows per provider (token bucket with a burst of
	// one minute's worth). Zero writes none; rejections are counted in metrics either way.
	RejectReceiptsPerMinute int
	// RecordTimeout bounds one Record call, so that a stuck database answers 503 before the provider's
	// own read timeout (Calendly: 15 s) turns it into an unexplained failure. Zero means the default.
	RecordTimeout time.Duration
	// RetryAfter is sent with every 503. Zero means the default.
	RetryAfter time.Duration
	// MaxRecording bounds the authentic deliveries mapped and recorded at once; one more waits up to
	// RecordQueueWait for a slot and is then answered 503 (code "overloaded") with Retry-After. Zero
	// means no bound.
	MaxRecording int
	// RecordQueueWait is how long a delivery waits for a recording slot (see MaxRecording).
	RecordQueueWait time.Duration
	// DrainTimeout bounds the wait for in-flight requests on shutdown. Zero means the default.
	DrainTimeout time.Duration
	// ReadHeaderTimeout bounds reading one request's headers on both listeners; zero means
	// DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading one whole request, body included; zero means DefaultReadTimeout.
	ReadTimeout time.Duration
	// LogSummaryInterval: a failure that repeats (a 503 per delivery while the store is down, a
	// warning per /readyz probe) is logged at most about once per interval per kind, the line saying
	// how many occurrences it stands for; zero means DefaultLogSummaryInterval.
	LogSummaryInterval time.Duration
	// AdminRoutes, when set, mounts the admin surface's routes (the read API under /api/, the operator
	// UI under /ui/, /admin/) next to /metrics on the admin handler. They never answer on the public
	// one (Handler), which serves only /webhooks/*, /healthz and /readyz.
	AdminRoutes func(mux Mux)
	// GuardMetrics, when set, wraps /metrics (the token check, BOOKINGLEDGER_METRICS_AUTH=token); nil
	// serves it open.
	GuardMetrics func(http.Handler) http.Handler
}

// Server is the HTTP ingress. Create it with New; it is safe for concurrent use.
type Server struct {
	ledger    Ledger
	deferrer  Deferrer
	providers map[string]providers.Provider
	ready     Checker
	log       *slog.Logger
	registry  *prometheus.Registry
	metrics   *metrics
	clock     func() time.Time
	maxBody   int64
	buckets   map[string]*tokenBucket // nil when rejected receipts are off
	recordTO  time.Duration
	admit     *admission
	retry     time.Duration
	drain     time.Duration
	headerTO  time.Duration
	readTO    time.Duration
	summary   *logSummary
	public    *routeMux
	admin     *routeMux
}

// New builds a server from cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Ledger == nil {
		return nil, errors.New("httpapi: no ledger")
	}
	if cfg.Ready == nil {
		return nil, errors.New("httpapi: no readiness checker")
	}
	if cfg.MaxBodyBytes < 0 || cfg.RejectReceiptsPerMinute < 0 || cfg.RecordTimeout < 0 || cfg.MaxRecording < 0 || cfg.RecordQueueWait < 0 || cfg.RetryAfter < 0 || cfg.DrainTimeout < 0 || cfg.ReadHeaderTimeout < 0 || cfg.ReadTimeout < 0 || cfg.LogSummaryInterval < 0 {
		return nil, errors.New("httpapi: negative limit")
	}
	s := &Server{
		ledger:    cfg.Ledger,
		deferrer:  cfg.Deferrer,
		providers: make(map[string]providers.Provider, len(cfg.Providers)),
		ready:     cfg.Ready,
		log:       cfg.Logger,
		registry:  cfg.Registry,
		clock:     cfg.Clock,
		maxBody:   cmp.Or(cfg.MaxBodyBytes, DefaultMaxBodyBytes),
		recordTO:  cmp.Or(cfg.RecordTimeout, DefaultRecordTimeout),
		admit:     newAdmission(cfg.MaxRecording, cfg.RecordQueueWait),
		retry:     cmp.Or(cfg.RetryAfter, DefaultRetryAfter),
		drain:     cmp.Or(cfg.DrainTimeout, DefaultDrainTimeout),
		headerTO:  cmp.Or(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		readTO:    cmp.Or(cfg.ReadTimeout, DefaultReadTimeout),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.summary = newLogSummary(s.log, cmp.Or(cfg.LogSummaryInterval, DefaultLogSummaryInterval))
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
	}
	if s.clock == nil {
		s.clock = time.Now
	}
	now := s.clock()
	if cfg.RejectReceiptsPerMinute > 0 {
		s.buckets = make(map[string]*tokenBucket, len(cfg.Providers))
	}
	for _, p := range cfg.Providers {
		name := p.Name()
		if name == "" || name == unknownProviderLabel {
			return nil, fmt.Errorf("httpapi: provider name %q is reserved", name)
		}
		if _, dup := s.providers[name]; dup {
			return nil, fmt.Errorf("httpapi: provider %q configured twice", name)
		}
		s.providers[name] = p
		if s.buckets != nil {
			s.buckets[name] = newTokenBucket(cfg.RejectReceiptsPerMinute, now)
		}
	}
	m, err := newMetrics(s.registry)
	if err != nil {
		return nil, err
	}
	s.metrics = m

	s.public = newRouteMux()
	s.public.HandleFunc("POST /webhooks/{provider}", s.handleWebhook)
	s.public.HandleFunc("GET /healthz", s.handleHealth)
	s.public.HandleFunc("GET /readyz", s.handleReady)
	s.admin = newRouteMux()
	var metricsHandler http.Handler = promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry})
	if cfg.GuardMetrics != nil {
		metricsHandler = cfg.GuardMetrics(metricsHandler)
	}
	s.admin.Handle("GET /metrics", metricsHandler)
	if cfg.AdminRoutes != nil {
		cfg.AdminRoutes(s.admin)
	}
	return s, nil
}

// Handler is the public surface: /webhooks/{provider}, /healthz, /readyz.
func (s *Server) Handler() http.Handler { return s.public }

// AdminHandler is the admin surface: /metrics and whatever Config.AdminRoutes mounted.
func (s *Server) AdminHandler() http.Handler { return s.admin }

// PublicPatterns are the route patterns Handler serves.
func (s *Server) PublicPatterns() []string { return append([]string(nil), s.public.patterns...) }

// AdminPatterns are the route patterns AdminHandler serves.
func (s *Server) AdminPatterns() []string { return append([]string(nil), s.admin.patterns...) }

// Registry is the registry /metrics serves.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Endpoint is one listener and what it serves.
type Endpoint struct {
	// Name is the endpoint's name in logs ("public", "admin").
	Name     string
	Listener net.Listener
	// Handler is what the listener serves; nil means the public surface (Handler).
	Handler http.Handler
	// TLS, when set, serves HTTPS (HTTP/2 offered) with it; nil serves plain HTTP.
	TLS *tls.Config
}

// Serve answers requests on every endpoint until ctx ends, then stops accepting connections on all of
// them and waits up to the drain timeout for their in-flight requests to finish. It returns nil after
// a clean drain. When one endpoint fails to serve, the others are shut down and the error returned.
//
// Requests do not inherit ctx: a shutdown must let a delivery that is committing finish and get its
// answer, not cancel it halfway (which would cost the provider a retry at best).
func (s *Server) Serve(ctx context.Context, endpoints ...Endpoint) error {
	if len(endpoints) == 0 {
		return errors.New("serve http: no endpoint")
	}
	servers := make([]*http.Server, len(endpoints))
	errc := make(chan error, len(endpoints))
	for i, ep := range endpoints {
		srv := s.httpServer(ep)
		servers[i] = srv
		go func() {
			var err error
			if ep.TLS != nil {
				err = srv.ServeTLS(ep.Listener, "", "") // the certificate is in srv.TLSConfig
			} else {
				err = srv.Serve(jsonErrorListener{ep.Listener})
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				err = fmt.Errorf("serve http (%s): %w", ep.Name, err)
			} else {
				err = nil
			}
			errc <- err
		}()
	}
	var failed error
	select {
	case failed = <-errc:
		if failed == nil {
			failed = errors.New("serve http: a listener stopped")
		}
	case <-ctx.Done():
		s.log.Info("shutting down: draining in-flight requests", "timeout", s.drain.String())
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.drain)
	defer cancel()
	var (
		wg       sync.WaitGroup
		drainErr = make([]error, len(servers))
	)
	for i, srv := range servers {
		wg.Go(func() {
			if err := srv.Shutdown(dctx); err != nil {
				_ = srv.Close()
				drainErr[i] = err
			}
		})
	}
	wg.Wait()
	remaining := len(endpoints)
	if failed != nil {
		remaining-- // its error was read above
	}
	for range remaining {
		if err := <-errc; err != nil && failed == nil {
			failed = err
		}
	}
	if failed != nil {
		return failed
	}
	if err := errors.Join(drainErr...); err != nil {
		return fmt.Errorf("drain http requests: %w", err)
	}
	return nil
}

func (s *Server) httpServer(ep Endpoint) *http.Server {
	h := ep.Handler
	if h == nil {
		h = s.public
	}
	return &http.Server{
		Handler:           h,
		TLSConfig:         ep.TLS,
		ReadHeaderTimeout: s.headerTO,
		ReadTimeout:       max(s.readTO, s.headerTO),
		WriteTimeout:      s.recordTO + minWriteMargin,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.ready.Ready(ctx); err != nil {
		attrs := []slog.Attr{slog.String("error", err.Error())}
		if nr, ok := errors.AsType[*NotReady](err); ok && nr.Cause != nil {
			attrs = append(attrs, slog.String("cause", nr.Cause.Error()))
		}
		s.summary.Log("not ready", slog.LevelWarn, "not ready", attrs...)
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own response structs reach here; a failure is a programming error.
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
