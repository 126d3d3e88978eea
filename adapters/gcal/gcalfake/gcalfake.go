// Package gcalfake is an in-memory Google Calendar API v3 server for tests: the events endpoints the
// gcal target uses (insert, get, update, delete), answering as Google documents them — a client-chosen
// id is unique per calendar (a second insert is 409 "The requested identifier already exists", also
// for a deleted event: deleting only sets status "cancelled" and keeps the id), get returns cancelled
// events too, a delete of a deleted event is 410 "Resource has been deleted", every event has an ETag
// and a stale If-Match is 412; errors carry Google's JSON error body.
package gcalfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
)

// Event is a stored event (the fields the target writes and reads).
type Event struct {
	ID                 string          `json:"id"`
	Etag               string          `json:"etag"`
	Status             string          `json:"status"`
	Summary            string          `json:"summary,omitempty"`
	Description        string          `json:"description,omitempty"`
	Start              json.RawMessage `json:"start,omitempty"`
	End                json.RawMessage `json:"end,omitempty"`
	ExtendedProperties json.RawMessage `json:"extendedProperties,omitempty"`
}

// Server is the fake.
type Server struct {
	*httptest.Server

	mu         sync.Mutex
	fault      func(r *http.Request) (status int, retryAfter string)
	afterWrite func(r *http.Request)
	events     map[string]*Event // by calendar + "/" + id
	seq        int
	inserts    int // inserts that created an event
	calls      map[string]int
}

// SetFault sets f to see each request first; a non-zero status is answered with Google's error body
// instead (and Retry-After when retryAfter is set). Nil: none.
func (s *Server) SetFault(f func(r *http.Request) (status int, retryAfter string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// SetAfterWrite sets f to run after an insert or update was stored and before it is answered (a
// test stalls there to lose the answer). Nil: none.
func (s *Server) SetAfterWrite(f func(r *http.Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.afterWrite = f
}

// Inserts is how many inserts created an event.
func (s *Server) Inserts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inserts
}

// Calls is how many requests of method reached the events endpoints (after any fault).
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// Start starts the fake; its API base is URL() + "/calendar/v3/".
func Start() *Server {
	s := &Server{events: map[string]*Event{}, calls: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Endpoint is the base URL to give the client (option.WithEndpoint).
func (s *Server) Endpoint() string { return s.URL + "/calendar/v3/" }

// Events returns the stored events of calendar (deleted ones too).
func (s *Server) Events(calendar string) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Event
	for k, e := range s.events {
		if strings.HasPrefix(k, calendar+"/") {
			out = append(out, *e)
		}
	}
	return out
}

// Touch changes an event as another client would (a new ETag).
func (s *Server) Touch(calendar, id, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.events[calendar+"/"+id]
	e.Description = description
	e.Etag = s.etag()
}

func (s *Server) etag() string { s.seq++; return fmt.Sprintf(`"%d"`, 3181161784712000+s.seq) }

// Error writes Google's error body.
func Error(w http.ResponseWriter, code int, reason, message string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"errors": []map[string]string{{"domain": "global", "reason": reason, "message": message}},
		"code":   code, "message": message}})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	fault := s.fault
	s.mu.Unlock()
	if fault != nil {
		if code, ra := fault(r); code != 0 {
			if ra != "" {
				w.Header().Set("Retry-After", ra)
			}
			reason := "backendError"
			if code == http.StatusTooManyRequests || code == http.StatusForbidden {
				reason = "rateLimitExceeded"
			}
			Error(w, code, reason, http.StatusText(code))
			return
		}
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/calendar/v3/calendars/")
	if !ok {
		Error(w, http.StatusNotFound, "notFound", "Not Found")
		return
	}
	cal, tail, _ := strings.Cut(rest, "/events")
	if c, err := url.PathUnescape(cal); err == nil {
		cal = c
	}
	id := strings.TrimPrefix(tail, "/")
	key := cal + "/" + id
	s.mu.Lock()
	s.calls[r.Method]++
	s.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && id == "":
		var e Event
		if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
			Error(w, http.StatusBadRequest, "parseError", "Parse Error")
			return
		}
		if len(e.ID) < 5 || strings.Trim(e.ID, "0123456789abcdefghijklmnopqrstuv") != "" {
			Error(w, http.StatusBadRequest, "invalid", "Invalid resource id value.")
			return
		}
		s.mu.Lock()
		if _, taken := s.events[cal+"/"+e.ID]; taken {
			s.mu.Unlock()
			Error(w, http.StatusConflict, "duplicate", "The requested identifier already exists.")
			return
		}
		if e.Status == "" {
			e.Status = "confirmed"
		}
		e.Etag = s.etag()
		s.events[cal+"/"+e.ID] = &e
		s.inserts++
		out := e
		s.mu.Unlock()
		s.answer(w, r, out)
	case r.Method == http.MethodGet:
		s.mu.Lock()
		e, found := s.events[key]
		var out Event
		if found {
			out = *e
		}
		s.mu.Unlock()
		if !found {
			Error(w, http.StatusNotFound, "notFound", "Not Found")
			return
		}
		writeJSON(w, out)
	case r.Method == http.MethodPut:
		var e Event
		if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
			Error(w, http.StatusBadRequest, "parseError", "Parse Error")
			return
		}
		s.mu.Lock()
		cur, found := s.events[key]
		switch {
		case !found:
			s.mu.Unlock()
			Error(w, http.StatusNotFound, "notFound", "Not Found")
			return
		case r.Header.Get("If-Match") != "" && r.Header.Get("If-Match") != cur.Etag:
			s.mu.Unlock()
			Error(w, http.StatusPreconditionFailed, "conditionNotMet", "Precondition Failed")
			return
		}
		e.ID = cur.ID
		if e.Status == "" {
			e.Status = "confirmed"
		}
		e.Etag = s.etag()
		s.events[key] = &e
		out := e
		s.mu.Unlock()
		s.answer(w, r, out)
	case r.Method == http.MethodDelete:
		s.mu.Lock()
		cur, found := s.events[key]
		switch {
		case !found:
			s.mu.Unlock()
			Error(w, http.StatusNotFound, "notFound", "Not Found")
			return
		case cur.Status == "cancelled":
			s.mu.Unlock()
			Error(w, http.StatusGone, "deleted", "Resource has been deleted")
			return
		}
		cur.Status, cur.Etag = "cancelled", s.etag()
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	default:
		Error(w, http.StatusMethodNotAllowed, "httpMethodNotAllowed", "Method Not Allowed")
	}
}

func (s *Server) answer(w http.ResponseWriter, r *http.Request, e Event) {
	s.mu.Lock()
	after := s.afterWrite
	s.mu.Unlock()
	if after != nil {
		after(r)
	}
	writeJSON(w, e)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_ = json.NewEncoder(w).Encode(v)
}
