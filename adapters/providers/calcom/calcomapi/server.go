package calcomapi

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"bookingledger/adapters/providers/fakeapi"
)

// Request is one request the fake answered: no query (filters may hold addresses), no headers.
type Request struct {
	Method string
	Path   string
	Status int
}

// Config tunes a fake.
type Config struct {
	// Addr is the listen address; empty means a free port on 127.0.0.1.
	Addr string
	// Key is the API key the fake accepts; empty accepts any bearer token starting with "cal_".
	Key string
	// OnRequest is called after each answered request; may be nil.
	OnRequest func(Request)
	// Now is the fake's clock (creation and update times, the rate-limit window); nil is time.Now.
	Now func() time.Time
}

// Server is a running fake.
type Server struct {
	cfg Config
	l   *fakeapi.Listener

	mu       sync.Mutex
	requests int
	limit    int           // requests per window; 0 = unlimited
	window   time.Duration // rate-limit window
	winStart time.Time
	used     int
	bookings []*Booking // in creation order; the id is the index + 1
	byUID    map[string]*Booking
	hooks    []*Webhook
}

// Start listens on 127.0.0.1 (or cfg.Addr) and serves until Close.
func Start(cfg Config) (*Server, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	l, err := fakeapi.Listen(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("calcom api fake: %w", err)
	}
	s := &Server{cfg: cfg, l: l, byUID: map[string]*Booking{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/bookings", s.api(s.listBookings))
	mux.HandleFunc("GET /v2/bookings/{uid}", s.api(s.getBooking))
	mux.HandleFunc("GET /v2/webhooks", s.api(s.listWebhooks))
	mux.HandleFunc("POST /v2/webhooks", s.api(s.createWebhook))
	mux.HandleFunc("GET /v2/webhooks/{id}", s.api(s.getWebhook))
	mux.HandleFunc("PATCH /v2/webhooks/{id}", s.api(s.patchWebhook))
	mux.HandleFunc("DELETE /v2/webhooks/{id}", s.api(s.deleteWebhook))
	mux.HandleFunc("POST /_fake/deliveries", s.admin(s.delivery))
	// `bookingledger send calcom … --url <host>/_fake/deliveries` posts here.
	mux.HandleFunc("POST /_fake/deliveries/webhooks/calcom", s.admin(s.delivery))
	mux.HandleFunc("POST /_fake/subscriptions/{id}/disable", s.admin(s.disable))
	s.l.Serve(mux)
	return s, nil
}

// URL is the API base to give bookingledger (BOOKINGLEDGER_CALCOM_API_URL), like
// https://api.cal.com/v2.
func (s *Server) URL() string { return s.l.Origin() + "/v2" }

// AdminURL is the base of the /_fake routes.
func (s *Server) AdminURL() string { return s.l.Origin() + "/_fake" }

// Close stops the fake.
func (s *Server) Close() error {
	return s.l.Close()
}

// Requests returns how many API requests (not /_fake ones) the fake has answered, 429s included.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// SetBudget lets limit requests through per window (Cal.com: 120 a minute for an API key) and answers
// the rest with 429 until the window, on the fake's clock, ends. limit 0 removes the budget.
func (s *Server) SetBudget(limit int, window time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit, s.window, s.winStart, s.used = limit, window, s.cfg.Now(), 0
}

// statusRecorder keeps the status a handler wrote, for OnRequest.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (s *Server) report(w http.ResponseWriter, r *http.Request, h http.HandlerFunc) {
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	h(rec, r)
	if s.cfg.OnRequest != nil {
		s.cfg.OnRequest(Request{Method: r.Method, Path: r.URL.Path, Status: rec.status})
	}
}

// api wraps an API route: count, rate limit (before authentication, as Cal.com limits unauthenticated
// callers too), then the bearer key.
func (s *Server) api(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.report(w, r, func(w http.ResponseWriter, r *http.Request) {
			if !s.allow(w) {
				writeError(w, r, http.StatusTooManyRequests, "ThrottlerException", "Too Many Requests")
				return
			}
			if !s.authorized(r) {
				writeError(w, r, http.StatusUnauthorized, "UnauthorizedException", "Invalid Access Token.")
				return
			}
			h(w, r)
		})
	}
}

func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.report(w, r, h) }
}

// allow counts the request against the budget and sets the rate-limit headers.
func (s *Server) allow(w http.ResponseWriter) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if s.limit <= 0 {
		return true
	}
	now := s.cfg.Now()
	if !now.Before(s.winStart.Add(s.window)) {
		s.winStart, s.used = now, 0
	}
	reset := s.winStart.Add(s.window)
	h := w.Header()
	h.Set("X-RateLimit-Limit-Default", strconv.Itoa(s.limit))
	h.Set("X-RateLimit-Reset-Default", strconv.FormatInt(int64(math.Ceil(float64(reset.UnixMilli())/1000)), 10))
	if s.used >= s.limit {
		h.Set("X-RateLimit-Remaining-Default", "0")
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(reset.Sub(now).Seconds()))))
		return false
	}
	s.used++
	h.Set("X-RateLimit-Remaining-Default", strconv.Itoa(s.limit-s.used))
	return true
}

func (s *Server) authorized(r *http.Request) bool {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || !strings.HasPrefix(token, "cal_") {
		return false
	}
	return s.cfg.Key == "" || token == s.cfg.Key
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with Cal.com API v2's error body.
func writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	writeJSON(w, status, map[string]any{
		"status":    "error",
		"timestamp": time.Now().UTC().Format(millis),
		"path":      r.URL.Path,
		"error":     map[string]any{"code": code, "message": msg},
	})
}

func writeData(w http.ResponseWriter, status int, data any) {
	writeJSON(w, status, map[string]any{"status": "success", "data": data})
}

const millis = "2006-01-02T15:04:05.000Z07:00"
