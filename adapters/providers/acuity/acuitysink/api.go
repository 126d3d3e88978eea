package acuitysink

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// api wraps an Acuity route: it counts the request, spends the budget (429 past it) and requires
// basic auth (any credentials: the sink is for development).
func (s *Server) api(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !s.spend():
			writeError(w, http.StatusTooManyRequests, "too_many_requests", "Too many requests. Please slow down.")
		case !hasBasicAuth(r):
			writeError(w, http.StatusUnauthorized, "unauthorized", "Unauthorized")
		default:
			h(w, r)
		}
	})
}

func hasBasicAuth(r *http.Request) bool {
	_, _, ok := r.BasicAuth()
	return ok
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

// report tells OnRequest about an answered list or webhooks request.
func (s *Server) report(r *http.Request, status, appointments int) {
	if s.cfg.OnRequest != nil {
		s.cfg.OnRequest(Request{Method: r.Method, Path: r.URL.Path, Status: status, Appointments: appointments})
	}
}

// writeError answers as Acuity does: {"status_code","message","error"}.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"status_code": status, "message": msg, "error": code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Made-up clients: an appointment's client is derived from its id, so that the invitee e-mail step
// has an address to write to in the tour. Names of computing pioneers, addresses at example.com.
var (
	firstNames = []string{"Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "John"}
	lastNames  = []string{"Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Backus"}
)

// Contact is the client the sink answers for appointment id n.
func Contact(n int64) (first, last, email string) {
	first, last = firstNames[n%8], lastNames[(n/8)%8]
	return first, last, strings.ToLower(first+"."+last) + "." + strconv.FormatInt(n, 10) + "@example.com"
}

// document renders an appointment as GET /appointments/{id} and the list do.
func document(id string, a Appointment) map[string]any {
	const layout = "2006-01-02T15:04:05-0700"
	n, _ := strconv.ParseInt(id, 10, 64)
	first, last, email := Contact(n)
	return map[string]any{
		"id":              n,
		"firstName":       first,
		"lastName":        last,
		"email":           email,
		"datetime":        a.Start.Format(layout),
		"endTime":         strings.ToLower(a.Start.Add(time.Duration(a.Minutes) * time.Minute).Format("3:04pm")),
		"duration":        strconv.Itoa(a.Minutes),
		"calendarID":      a.CalendarID,
		"classID":         nil,
		"canceled":        a.Canceled,
		"noShow":          a.NoShow,
		"datetimeCreated": baseCreated.Format(layout),
		"timezone":        "UTC",
		"type":            "Consultation (dev sink)",
	}
}
