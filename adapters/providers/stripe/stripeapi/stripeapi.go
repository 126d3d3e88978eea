package stripeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"bookingledger/adapters/providers/fakeapi"
)

// Limits Stripe documents, which the fake enforces.
const (
	// Retention is how far back GET /v1/events reaches.
	Retention = 30 * 24 * time.Hour
	// MaxEndpoints is the number of webhook endpoints one account may have.
	MaxEndpoints = 16
	// MaxTypes is how many types[] one event list may ask for.
	MaxTypes = 20
	// DefaultRatePerSecond is the sandbox's request budget per second.
	DefaultRatePerSecond = 25
)

// Config tunes a fake.
type Config struct {
	// Addr is the listen address; empty means a free port on 127.0.0.1.
	Addr string
	// Key is the secret key requests must authenticate with (basic auth user, or a bearer token).
	Key string
	// RatePerSecond is the request budget of one clock second, beyond which the fake answers 429;
	// zero means DefaultRatePerSecond.
	RatePerSecond int
	// Now is the fake's clock (event retention, the request budget); nil means time.Now. Tests that
	// record the client's waits advance it from their Sleep.
	Now func() time.Time
	// OnRequest, when set, is called after each API request is answered (admin routes excluded).
	OnRequest func(Request)
}

// Request is one API request the fake answered.
type Request struct {
	Method string
	Path   string
	Status int
}

// Server is a running fake.
type Server struct {
	cfg Config
	l   *fakeapi.Listener

	mu         sync.Mutex
	events     []event
	endpoints  []*endpoint
	idempotent map[string]replay
	seq        int
	requests   int
	second     int64
	inSecond   int
}

// Start listens on cfg.Addr (a loopback port when empty) and serves until Close.
func Start(cfg Config) (*Server, error) {
	if cfg.Key == "" {
		return nil, errors.New("stripe API fake: a key is required")
	}
	if cfg.RatePerSecond <= 0 {
		cfg.RatePerSecond = DefaultRatePerSecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	l, err := fakeapi.Listen(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("stripe API fake: %w", err)
	}
	s := &Server{cfg: cfg, l: l, idempotent: map[string]replay{}}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/events", s.api(s.listEvents))
	mux.Handle("GET /v1/webhook_endpoints", s.api(s.listEndpoints))
	mux.Handle("POST /v1/webhook_endpoints", s.api(s.createEndpoint))
	mux.Handle("GET /v1/webhook_endpoints/{id}", s.api(s.getEndpoint))
	mux.Handle("POST /v1/webhook_endpoints/{id}", s.api(s.updateEndpoint))
	mux.Handle("DELETE /v1/webhook_endpoints/{id}", s.api(s.deleteEndpoint))
	mux.Handle("/v1/", s.api(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", "Unrecognized request URL ("+r.Method+": "+r.URL.Path+").")
	}))
	mux.HandleFunc("POST /_fake/deliveries", s.deliver)
	mux.HandleFunc("POST /_fake/subscriptions/{id}/disable", s.disableRoute)
	s.l.Serve(mux)
	return s, nil
}

// URL is the API base to give bookingledger (Stripe's is https://api.stripe.com).
func (s *Server) URL() string { return s.l.Origin() }

// Close stops the fake.
func (s *Server) Close() error {
	return s.l.Close()
}

// Requests is the number of API requests received so far, refused ones included.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// api wraps a Stripe route: it counts the request, spends the budget (429 past it), checks the key
// and reports the answer.
func (s *Server) api(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		switch {
		case !s.spend():
			writeError(rec, http.StatusTooManyRequests, "invalid_request_error", "rate_limit",
				"Request rate limit exceeded. Learn more about rate limits here https://stripe.com/docs/rate-limits.")
		case !s.authorized(r):
			writeError(rec, http.StatusUnauthorized, "invalid_request_error", "",
				"Invalid API Key provided. You can find your API keys in the Dashboard.")
		default:
			h(rec, r)
		}
		if s.cfg.OnRequest != nil {
			s.cfg.OnRequest(Request{Method: r.Method, Path: r.URL.Path, Status: rec.status})
		}
	})
}

// spend counts a request against the budget of the current clock second.
func (s *Server) spend() bool {
	now := s.cfg.Now().Unix()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if now != s.second {
		s.second, s.inSecond = now, 0
	}
	s.inSecond++
	return s.inSecond <= s.cfg.RatePerSecond
}

func (s *Server) authorized(r *http.Request) bool {
	if user, _, ok := r.BasicAuth(); ok {
		return user == s.cfg.Key
	}
	return r.Header.Get("Authorization") == "Bearer "+s.cfg.Key
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// writeError answers as Stripe does: {"error":{"type","code","message"}}.
func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	e := map[string]string{"type": typ, "message": msg}
	if code != "" {
		e["code"] = code
	}
	writeJSON(w, status, map[string]any{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
