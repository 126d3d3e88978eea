package calendlyapi

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

// DefaultURIBase is the host Calendly's resource URIs name. URIs are identifiers (booking IDs are
// derived from them), so the fake hands out Calendly's own, whatever address it listens on.
const DefaultURIBase = "https://api.calendly.com"

// Config tunes a fake.
type Config struct {
	// Addr is the listen address; empty means a free port on 127.0.0.1.
	Addr string
	// Token is the one bearer token accepted; empty accepts any non-empty bearer token.
	Token string
	// Member makes the token's user a plain member of its organization: organization-wide listings
	// answer 403, as Calendly does for a user who is not an admin or owner.
	Member bool
	// FreePlan refuses the webhook subscription routes with 403, as Calendly does on plans without
	// webhooks.
	FreePlan bool
	// Budget is how many API requests a window allows (0: unlimited); Window is its length (default
	// one minute, Calendly's).
	Budget int
	Window time.Duration
	// Now is the fake's clock (default time.Now): tests advance it to pass a rate-limit window.
	Now func() time.Time
	// URIBase is the host of resource URIs (default DefaultURIBase).
	URIBase string
	// OnRequest, when set, is called after each answered request with its method, path (never the
	// query: it may hold an e-mail filter) and status.
	OnRequest func(method, path string, status int)
}

// Server is a running fake.
type Server struct {
	cfg Config
	l   *fakeapi.Listener

	mu        sync.Mutex
	seq       int
	requests  int
	window    time.Time // start of the current rate-limit window
	used      int       // requests in it
	me, org   string
	events    map[string]*Event // by URI
	order     []string          // event URIs in creation order
	invitees  map[string]*Invitee
	byEvent   map[string][]string // event URI → invitee URIs in creation order
	subs      map[string]*Subscription
	subsOrder []string
}

// Start listens on cfg.Addr and serves until Close.
func Start(cfg Config) (*Server, error) {
	if cfg.Window <= 0 {
		cfg.Window = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.URIBase == "" {
		cfg.URIBase = DefaultURIBase
	}
	l, err := fakeapi.Listen(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("calendly api fake: %w", err)
	}
	s := &Server{
		cfg: cfg, l: l,
		events: map[string]*Event{}, invitees: map[string]*Invitee{}, byEvent: map[string][]string{},
		subs: map[string]*Subscription{},
	}
	s.me = cfg.URIBase + "/users/" + s.newID("USR")
	s.org = cfg.URIBase + "/organizations/" + s.newID("ORG")
	s.l.Serve(s.routes())
	return s, nil
}

// URL is the API's base URL (BOOKINGLEDGER_CALENDLY_API_URL).
func (s *Server) URL() string { return s.l.Origin() }

// Close stops the fake.
func (s *Server) Close() error {
	return s.l.Close()
}

// Me returns the token's user URI and its organization URI.
func (s *Server) Me() (user, organization string) { return s.me, s.org }

// Requests is the number of API requests answered so far (any status; the /_fake routes excluded).
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

func (s *Server) routes() http.Handler {
	api := http.NewServeMux()
	api.HandleFunc("GET /users/me", s.getMe)
	api.HandleFunc("GET /scheduled_events", s.listEvents)
	api.HandleFunc("GET /scheduled_events/{uuid}", s.getEvent)
	api.HandleFunc("GET /scheduled_events/{uuid}/invitees", s.listInvitees)
	api.HandleFunc("GET /scheduled_events/{uuid}/invitees/{invitee}", s.getInvitee)
	api.HandleFunc("GET /webhook_subscriptions", s.listSubscriptions)
	api.HandleFunc("POST /webhook_subscriptions", s.createSubscription)
	api.HandleFunc("GET /webhook_subscriptions/{uuid}", s.getSubscription)
	api.HandleFunc("DELETE /webhook_subscriptions/{uuid}", s.deleteSubscription)
	api.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "Resource Not Found", "The server could not find the requested resource.")
	})

	mux := http.NewServeMux()
	mux.HandleFunc("POST /_fake/deliveries", s.postDelivery)
	// The same, where `bookingledger send calendly <event> --url <fake>/_fake` posts.
	mux.HandleFunc("POST /_fake/webhooks/calendly", s.postDelivery)
	mux.HandleFunc("POST /_fake/subscriptions/{uuid}/disable", s.postDisable)
	mux.Handle("/", s.guard(api))
	return s.report(mux)
}

// guard does what Calendly does before any route: the bearer token (401), then the request budget
// (429); every authenticated answer carries the rate-limit headers.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests++
		s.mu.Unlock()
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" || (s.cfg.Token != "" && token != s.cfg.Token) {
			writeError(w, http.StatusUnauthorized, "Unauthenticated", "The access token is invalid")
			return
		}
		limited, remaining, reset := s.spend()
		if s.cfg.Budget > 0 {
			w.Header().Set("X-RateLimit-Limit", strconv.Itoa(s.cfg.Budget))
			w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
			w.Header().Set("X-RateLimit-Reset", strconv.Itoa(reset))
		}
		if limited {
			writeError(w, http.StatusTooManyRequests, "Too Many Requests", "You have exceeded the rate limit. Please try again later.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// spend takes one request from the current window's budget: limited when none is left; remaining
// after this request; reset in whole seconds until the window ends (rounded up, never 0).
func (s *Server) spend() (limited bool, remaining, reset int) {
	if s.cfg.Budget <= 0 {
		return false, 0, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	if s.window.IsZero() || !now.Before(s.window.Add(s.cfg.Window)) {
		s.window, s.used = now, 0
	}
	reset = max(int(math.Ceil(s.window.Add(s.cfg.Window).Sub(now).Seconds())), 1)
	if s.used >= s.cfg.Budget {
		return true, 0, reset
	}
	s.used++
	return false, s.cfg.Budget - s.used, reset
}

func (s *Server) report(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		if s.cfg.OnRequest != nil {
			s.cfg.OnRequest(r.Method, r.URL.Path, rec.status)
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// newID returns a fresh 16-character identifier in Calendly's style; prefix tells kinds apart when
// reading a log. Callers hold mu or run before serving.
func (s *Server) newID(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s%013d", prefix, s.seq)
}

// errorDetail is one entry of Calendly's error "details".
type errorDetail struct {
	Parameter string `json:"parameter"`
	Message   string `json:"message"`
}

func writeError(w http.ResponseWriter, status int, title, message string, details ...errorDetail) {
	body := map[string]any{"title": title, "message": message}
	if len(details) > 0 {
		body["details"] = details
	}
	writeJSON(w, status, body)
}

func invalidArgument(w http.ResponseWriter, parameter, message string) {
	writeError(w, http.StatusBadRequest, "Invalid Argument", "The supplied parameters are invalid.",
		errorDetail{Parameter: parameter, Message: message})
}

func permissionDenied(w http.ResponseWriter, message string) {
	writeError(w, http.StatusForbidden, "Permission Denied", message)
}

func notFound(w http.ResponseWriter) {
	writeError(w, http.StatusNotFound, "Resource Not Found", "The server could not find the requested resource.")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
