package acuitysink

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
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
	// OnFetch is called after each answered GET; OnPut after each state change. Both may be nil.
	OnFetch func(Fetch)
	OnPut   func(id string, a Appointment)
}

// The synthesized appointments are fixed, so that a redelivery is a duplicate across restarts too:
// created at baseCreated, starting on baseDay.
var (
	baseCreated = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	baseDay     = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
)

// Server is a running sink.
type Server struct {
	cfg  Config
	ln   net.Listener
	srv  *http.Server
	done chan error

	mu   sync.Mutex
	appt map[string]Appointment
}

// Start listens and serves until Close.
func Start(cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("acuity sink: %w", err)
	}
	s := &Server{cfg: cfg, ln: ln, done: make(chan error, 1), appt: map[string]Appointment{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/appointments/{id}", s.get)
	mux.HandleFunc("PUT /api/v1/appointments/{id}", s.put)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// URL is the API base to give bookingledger (BOOKINGLEDGER_ACUITY_API_URL).
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() + "/api/v1" }

// Close stops the sink.
func (s *Server) Close() error {
	err := s.srv.Close()
	if serr := <-s.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}

// Put sets what the sink answers for id from now on.
func (s *Server) Put(id string, a Appointment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appt[id] = a
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
	if _, _, ok := r.BasicAuth(); !ok {
		http.Error(w, `{"status_code":401,"message":"Unauthorized","error":"unauthorized"}`, http.StatusUnauthorized)
		return
	}
	id := r.PathValue("id")
	a, ok := s.lookup(id)
	if !ok {
		http.Error(w, `{"status_code":404,"message":"Appointment not found.","error":"not_found"}`, http.StatusNotFound)
		return
	}
	const layout = "2006-01-02T15:04:05-0700"
	n, _ := strconv.ParseInt(id, 10, 64)
	doc := map[string]any{
		"id":              n,
		"datetime":        a.Start.Format(layout),
		"duration":        strconv.Itoa(a.Minutes),
		"calendarID":      a.CalendarID,
		"classID":         nil,
		"canceled":        a.Canceled,
		"noShow":          a.NoShow,
		"datetimeCreated": baseCreated.Format(layout),
		"timezone":        "UTC",
		"type":            "Consultation (dev sink)",
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(doc)
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
