// Package msgraphfake is an in-memory Microsoft Graph v1.0 calendar server for tests: the endpoints
// the msgraph target uses, answering as Graph documents them — POST …/events answers 201 with the
// event, and a POST repeating a transactionId returns the event it created instead of a second one;
// $filter on a single-value extended property finds events by its value (case-insensitive), and
// $expand returns the property; PATCH takes If-Match and answers a stale one 412
// ErrorIrresolvableConflict; PATCH or DELETE of an event that is not there is 404 ErrorItemNotFound;
// DELETE is 204. Errors carry Graph's JSON error body.
package msgraphfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
)

// Event is a stored event.
type Event struct {
	ID         string            `json:"id"`
	ETag       string            `json:"@odata.etag"`
	Subject    string            `json:"subject,omitempty"`
	Body       json.RawMessage   `json:"body,omitempty"`
	Start      json.RawMessage   `json:"start,omitempty"`
	End        json.RawMessage   `json:"end,omitempty"`
	TxID       string            `json:"transactionId,omitempty"`
	Properties []json.RawMessage `json:"singleValueExtendedProperties,omitempty"`
	props      map[string]string
	user       string
}

// Server is the fake.
type Server struct {
	*httptest.Server

	mu     sync.Mutex
	fault  func(r *http.Request) (status int, retryAfter string)
	after  func(r *http.Request)
	events map[string]*Event // by id
	seq    int
	calls  map[string]int
}

// Start starts the fake; its base is Endpoint().
func Start() *Server {
	s := &Server{events: map[string]*Event{}, calls: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Endpoint is the base URL to give the target.
func (s *Server) Endpoint() string { return s.URL + "/v1.0/" }

// SetFault sets f to see each request first; a non-zero status is answered instead, with
// Retry-After when retryAfter is set.
func (s *Server) SetFault(f func(r *http.Request) (int, string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

// SetAfterWrite sets f to run after a POST or PATCH was stored, before it is answered.
func (s *Server) SetAfterWrite(f func(r *http.Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.after = f
}

// Events returns the stored events.
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Event
	for _, e := range s.events {
		out = append(out, *e)
	}
	return out
}

// Calls is how many requests of method got past the fault.
func (s *Server) Calls(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[method]
}

// Touch changes an event as another client would (a new ETag).
func (s *Server) Touch(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events[id].Body = json.RawMessage(`{"contentType":"text","content":"the host's note"}`)
	s.events[id].ETag = s.etag()
}

func (s *Server) etag() string { s.seq++; return fmt.Sprintf(`W/"DwAAABYAAAB%06d"`, s.seq) }

// Error writes Graph's error body.
func Error(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": message}})
}

var (
	eventsPath = regexp.MustCompile(`^/v1\.0/users/([^/]+)/(?:calendar|calendars/[^/]+)/events$`)
	eventPath  = regexp.MustCompile(`^/v1\.0/users/([^/]+)/events/([^/]+)$`)
	filterRe   = regexp.MustCompile(`^singleValueExtendedProperties/Any\(ep: ep/id eq '([^']+)' and ep/value eq '([^']*)'\)$`)
)

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	fault := s.fault
	s.mu.Unlock()
	if fault != nil {
		if status, ra := fault(r); status != 0 {
			if ra != "" {
				w.Header().Set("Retry-After", ra)
			}
			code := "generalException"
			if status == http.StatusTooManyRequests {
				code = "TooManyRequests"
			}
			Error(w, status, code, http.StatusText(status))
			return
		}
	}
	s.mu.Lock()
	s.calls[r.Method]++
	s.mu.Unlock()
	if m := eventsPath.FindStringSubmatch(r.URL.Path); m != nil {
		switch r.Method {
		case http.MethodPost:
			s.create(w, r, m[1])
		case http.MethodGet:
			s.list(w, r, m[1])
		default:
			Error(w, http.StatusMethodNotAllowed, "Request_BadRequest", "method not allowed")
		}
		return
	}
	m := eventPath.FindStringSubmatch(r.URL.Path)
	if m == nil {
		Error(w, http.StatusNotFound, "ResourceNotFound", "Resource not found for the segment.")
		return
	}
	s.mu.Lock()
	e, found := s.events[m[2]]
	if !found || e.user != m[1] {
		s.mu.Unlock()
		Error(w, http.StatusNotFound, "ErrorItemNotFound", "The specified object was not found in the store.")
		return
	}
	switch r.Method {
	case http.MethodDelete:
		delete(s.events, m[2])
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case http.MethodPatch:
		if im := r.Header.Get("If-Match"); im != "" && im != e.ETag {
			s.mu.Unlock()
			Error(w, http.StatusPreconditionFailed, "ErrorIrresolvableConflict",
				"The send or update operation could not be performed because the change key passed in the request does not match the current change key for the item.")
			return
		}
		var patch Event
		if err := json.NewDecoder(r.Body).Decode(&patch); err != nil {
			s.mu.Unlock()
			Error(w, http.StatusBadRequest, "RequestBodyRead", err.Error())
			return
		}
		if patch.Subject != "" {
			e.Subject = patch.Subject
		}
		if patch.Start != nil {
			e.Start = patch.Start
		}
		if patch.End != nil {
			e.End = patch.End
		}
		if patch.Body != nil {
			e.Body = patch.Body
		}
		e.ETag = s.etag()
		out := *e
		after := s.after
		s.mu.Unlock()
		if after != nil {
			after(r)
		}
		writeJSON(w, http.StatusOK, out)
	default:
		s.mu.Unlock()
		Error(w, http.StatusMethodNotAllowed, "Request_BadRequest", "method not allowed")
	}
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, user string) {
	var e Event
	if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
		Error(w, http.StatusBadRequest, "RequestBodyRead", err.Error())
		return
	}
	e.props = map[string]string{}
	for _, raw := range e.Properties {
		var p struct{ ID, Value string }
		_ = json.Unmarshal(raw, &p)
		e.props[p.ID] = p.Value
	}
	e.Properties = nil // returned only when expanded
	s.mu.Lock()
	if e.TxID != "" {
		for _, old := range s.events {
			if old.user == user && old.TxID == e.TxID {
				out := *old
				s.mu.Unlock()
				writeJSON(w, http.StatusCreated, out) // no second event
				return
			}
		}
	}
	s.seq++
	e.ID = fmt.Sprintf("AAMkAGI2TG93AAA%06d=", s.seq)
	e.ETag = s.etag()
	e.user = user
	s.events[e.ID] = &e
	out := e
	after := s.after
	s.mu.Unlock()
	if after != nil {
		after(r)
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, user string) {
	m := filterRe.FindStringSubmatch(r.URL.Query().Get("$filter"))
	if m == nil {
		Error(w, http.StatusBadRequest, "ErrorInvalidUrlQueryFilter", "The query filter contains one or more invalid nodes.")
		return
	}
	expand := strings.Contains(r.URL.Query().Get("$expand"), m[1])
	s.mu.Lock()
	out := []Event{}
	for _, e := range s.events {
		if v, ok := e.props[m[1]]; ok && e.user == user && strings.EqualFold(v, m[2]) {
			c := *e
			if expand {
				p, _ := json.Marshal(map[string]string{"id": m[1], "value": v})
				c.Properties = []json.RawMessage{p}
			}
			out = append(out, c)
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"value": out})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
