package acuitysink

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"bookingledger/adapters/providers/fakeapi"
)

// Appointment is the state the sink answers for one appointment id.
type Appointment struct {
	Start      time.Time `json:"start"`
	Minutes    int       `json:"minutes"`
	CalendarID int64     `json:"calendarID"`
	Canceled   bool      `json:"canceled"`
	NoShow     bool      `json:"noShow"`
}

// Fetch is one appointment request the sink answered.
type Fetch struct {
	ID       string
	Canceled bool
	Start    time.Time
}

// Config tunes a sink.
type Config struct {
	// Addr is the listen address; empty means a free port on 127.0.0.1.
	Addr string
	// OnFetch is called after each answered GET of one appointment; OnPut after each state change;
	// OnRequest after each answered list or webhooks request. All may be nil.
	OnFetch   func(Fetch)
	OnPut     func(id string, a Appointment)
	OnRequest func(Request)
	// RatePerSecond is the request budget of one clock second, beyond which the sink answers 429;
	// zero means DefaultRatePerSecond.
	RatePerSecond int
	// Now is the sink's clock (the request budget); nil means time.Now.
	Now func() time.Time
}

// Request is one list or webhooks request the sink answered.
type Request struct {
	Method string
	Path   string
	Status int
	// Appointments is how many appointments a list answered.
	Appointments int
}

// DefaultRatePerSecond is the budget Acuity is reported to allow an IP (10 requests a second).
const DefaultRatePerSecond = 10

// The synthesized appointments are fixed, so that a redelivery is a duplicate across restarts too:
// created at baseCreated, starting on baseDay.
var (
	baseCreated = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	baseDay     = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
)

// Server is a running sink.
type Server struct {
	cfg Config
	l   *fakeapi.Listener

	mu       sync.Mutex
	appt     map[string]Appointment
	known    map[string]bool // ids fetched, set or delivered: what a list can find
	webhooks []webhook
	nextHook int
	requests int
	second   int64
	inSecond int
}

// Start listens and serves until Close.
func Start(cfg Config) (*Server, error) {
	if cfg.RatePerSecond <= 0 {
		cfg.RatePerSecond = DefaultRatePerSecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	l, err := fakeapi.Listen(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("acuity sink: %w", err)
	}
	s := &Server{cfg: cfg, l: l, appt: map[string]Appointment{}, known: map[string]bool{}}
	mux := http.NewServeMux()
	mux.Handle("GET /api/v1/appointments/{id}", s.api(s.get))
	mux.HandleFunc("PUT /api/v1/appointments/{id}", s.put)
	mux.Handle("GET /api/v1/appointments", s.api(s.list))
	mux.Handle("GET /api/v1/webhooks", s.api(s.listWebhooks))
	mux.Handle("POST /api/v1/webhooks", s.api(s.createWebhook))
	mux.Handle("DELETE /api/v1/webhooks/{id}", s.api(s.deleteWebhook))
	mux.HandleFunc("POST /api/v1/_fake/deliveries", s.deliver)
	mux.HandleFunc("POST /_fake/deliveries", s.deliver) // the same at the root, as the Stripe fake has it
	s.l.Serve(mux)
	return s, nil
}

// URL is the API base to give bookingledger (BOOKINGLEDGER_ACUITY_API_URL).
func (s *Server) URL() string { return s.l.Origin() + "/api/v1" }

// Close stops the sink.
func (s *Server) Close() error {
	return s.l.Close()
}

// Put sets what the sink answers for id from now on.
func (s *Server) Put(id string, a Appointment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appt[id] = a
	s.known[id] = true
}

// Requests is the number of API requests received so far (PUT and the admin route excluded),
// refused ones included.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// lookup returns id's state: the one Put set, or a 30-minute appointment on calendar 1 on baseDay at
// 09:00 UTC plus id (mod 8) hours, so that neighbouring ids do not collide and an id is stable.
func (s *Server) lookup(id string) (Appointment, bool) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 {
		return Appointment{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.appt[id]; ok {
		return a, true
	}
	return Appointment{Start: baseDay.Add(time.Duration(9+n%8) * time.Hour), Minutes: 30, CalendarID: 1}, true
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	a, ok := s.lookup(id)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "Appointment not found.")
		return
	}
	s.mu.Lock()
	s.known[id] = true
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, document(id, a))
	if s.cfg.OnFetch != nil {
		s.cfg.OnFetch(Fetch{ID: id, Canceled: a.Canceled, Start: a.Start})
	}
}

// put changes an appointment's state (not part of Acuity's API: how a developer plays the host who
// moves or cancels it). Fields left out keep their current value.
func (s *Server) put(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	a, ok := s.lookup(id)
	if !ok {
		http.Error(w, "appointment ids are positive integers", http.StatusNotFound)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
		http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if a.Minutes <= 0 || a.Start.IsZero() {
		http.Error(w, "start and minutes (> 0) are required", http.StatusBadRequest)
		return
	}
	s.Put(id, a)
	if s.cfg.OnPut != nil {
		s.cfg.OnPut(id, a)
	}
	w.WriteHeader(http.StatusNoContent)
}
