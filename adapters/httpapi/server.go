package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
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

// Defaults of Config.
const (
	DefaultMaxBodyBytes            = 1 << 20
	DefaultRejectReceiptsPerMinute = 60
	DefaultRecordTimeout           = 10 * time.Second
	DefaultRetryAfter              = 5 * time.Second
	DefaultDrainTimeout            = 15 * time.Second
	readyTimeout                   = 2 * time.Second
)

// Config holds a server's dependencies and limits.
type Config struct {
	Ledger Ledger
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
	// DrainTimeout bounds the wait for in-flight requests on shutdown. Zero means the default.
	DrainTimeout time.Duration
	// Routes, when set, mounts further routes (the JSON read API under /api/) on the server's mux, so
	// that they share its listener, timeouts and graceful drain.
	Routes func(mux *http.ServeMux)
}

// Server is the HTTP ingress. Create it with New; it is safe for concurrent use.
type Server struct {
	ledger    Ledger
	providers map[string]providers.Provider
	ready     Checker
	log       *slog.Logger
	registry  *prometheus.Registry
	metrics   *metrics
	clock     func() time.Time
	maxBody   int64
	buckets   map[string]*tokenBucket // nil when rejected receipts are off
	recordTO  time.Duration
	retry     time.Duration
	drain     time.Duration
	mux       *http.ServeMux
}

// New builds a server from cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Ledger == nil {
		return nil, errors.New("httpapi: no ledger")
	}
	if cfg.Ready == nil {
		return nil, errors.New("httpapi: no readiness checker")
	}
	if cfg.MaxBodyBytes < 0 || cfg.RejectReceiptsPerMinute < 0 || cfg.RecordTimeout < 0 || cfg.RetryAfter < 0 || cfg.DrainTimeout < 0 {
		return nil, errors.New("httpapi: negative limit")
	}
	s := &Server{
		ledger:    cfg.Ledger,
		providers: make(map[string]providers.Provider, len(cfg.Providers)),
		ready:     cfg.Ready,
		log:       cfg.Logger,
		registry:  cfg.Registry,
		clock:     cfg.Clock,
		maxBody:   orDefault(cfg.MaxBodyBytes, DefaultMaxBodyBytes),
		recordTO:  orDefault(cfg.RecordTimeout, DefaultRecordTimeout),
		retry:     orDefault(cfg.RetryAfter, DefaultRetryAfter),
		drain:     orDefault(cfg.DrainTimeout, DefaultDrainTimeout),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
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

	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /webhooks/{provider}", s.handleWebhook)
	s.mux.HandleFunc("GET /healthz", s.handleHealth)
	s.mux.HandleFunc("GET /readyz", s.handleReady)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry}))
	if cfg.Routes != nil {
		cfg.Routes(s.mux)
	}
	return s, nil
}

func orDefault[T int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Handler is the server's routes.
func (s *Server) Handler() http.Handler { return s.mux }

// Registry is the registry /metrics serves.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// Serve answers requests on ln until ctx ends, then stops accepting connections and waits up to the
// drain timeout for in-flight requests to finish. It returns nil after a clean drain.
//
// Requests do not inherit ctx: a shutdown must let a delivery that is committing finish and get its
// answer, not cancel it halfway (which would cost the provider a retry at best).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("shutting down: draining in-flight requests", "timeout", s.drain.String())
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.drain)
	defer cancel()
	err := srv.Shutdown(dctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", serr)
	}
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("drain http requests: %w", err)
	}
	return nil
}

func (s *Server) handleHealth(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.ready.Ready(ctx); err != nil {
		s.log.Warn("not ready", "error", err.Error())
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
