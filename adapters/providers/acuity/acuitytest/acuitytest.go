package acuitytest

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Appointment is the state of one appointment the fake serves. JSON renders it the way Acuity does:
// datetime with an offset without a colon, duration as a string of minutes, ids as numbers, and the
// personal fields a real response carries (fictional people).
type Appointment struct {
	ID                int64
	Start             time.Time // rendered in its own location's offset
	Duration          time.Duration
	CalendarID        int64
	AppointmentTypeID int64
	ClassID           int64 // 0 renders null
	Canceled          bool
	NoShow            bool
	Created           time.Time
	Timezone          string
}

// JSON renders the appointment as GET /appointments/{id} does.
func (a Appointment) JSON() []byte {
	const layout = "2006-01-02T15:04:05-0700"
	end := a.Start.Add(a.Duration)
	var classID any
	if a.ClassID != 0 {
		classID = a.ClassID
	}
	tz := a.Timezone
	if tz == "" {
		tz = "Europe/London"
	}
	doc := map[string]any{
		"id":                  a.ID,
		"firstName":           "Ada",
		"lastName":            "Lovelace",
		"phone":               "",
		"email":               "ada.lovelace@example.com",
		"date":                a.Start.Format("January 2, 2006"),
		"time":                strings.ToLower(a.Start.Format("3:04PM")),
		"endTime":             strings.ToLower(end.Format("3:04PM")),
		"dateCreated":         a.Created.Format("January 2, 2006"),
		"datetimeCreated":     a.Created.Format(layout),
		"datetime":            a.Start.Format(layout),
		"price":               "45.00",
		"priceSold":           "45.00",
		"paid":                "no",
		"amountPaid":          "0.00",
		"type":                "Initial consultation",
		"appointmentTypeID":   a.AppointmentTypeID,
		"classID":             classID,
		"addonIDs":            []int{},
		"category":            "",
		"duration":            strconv.Itoa(int(a.Duration / time.Minute)),
		"calendar":            "Grace Hopper",
		"calendarID":          a.CalendarID,
		"certificate":         nil,
		"confirmationPage":    fmt.Sprintf("https://app.acuityscheduling.com/schedule.php?owner=11145481&action=appt&id%%5B%%5D=%x", a.ID*7919),
		"location":            "",
		"notes":               "",
		"timezone":            tz,
		"calendarTimezone":    "Europe/London",
		"canceled":            a.Canceled,
		"canClientCancel":     !a.Canceled,
		"canClientReschedule": !a.Canceled,
		"labels":              nil,
		"forms":               []any{},
		"formsText":           "Name: Ada Lovelace\nPhone: \nEmail: ada.lovelace@example.com\n",
		"isVerified":          false,
		"scheduledBy":         nil,
		"noShow":              a.NoShow,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		panic(err) // only plain values above
	}
	return b
}

// Server is a fake of Acuity's GET /appointments/{id}. It checks basic auth (the user id and any of
// the accepted keys), answers 404 for appointments it does not know, and can be told to fail.
type Server struct {
	// URL and UserID are set by New and read-only afterwards.
	URL    string
	UserID string

	mu       sync.Mutex
	keys     []string
	docs     map[string][]byte
	failNext int
	failAll  bool
	status   int
	requests []string
}

// New starts a fake accepting userID with any of keys; it is closed at the end of the test.
func New(t testing.TB, userID string, keys ...string) *Server {
	t.Helper()
	s := &Server{UserID: userID, keys: keys, docs: map[string][]byte{}}
	hs := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(hs.Close)
	s.URL = hs.URL
	return s
}

// Put sets the state the fake answers for a.ID from now on.
func (s *Server) Put(a Appointment) { s.PutRaw(strconv.FormatInt(a.ID, 10), a.JSON()) }

// PutRaw sets the exact response body for id.
func (s *Server) PutRaw(id string, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.docs[id] = body
}

// FailNext makes the next n requests answer status.
func (s *Server) FailNext(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext, s.status = n, status
}

// FailAll makes every request answer status until Recover.
func (s *Server) FailAll(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failAll, s.status = true, status
}

// Recover ends FailAll and FailNext.
func (s *Server) Recover() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failAll, s.failNext = false, 0
}

// Requests lists the paths requested so far, in order.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.URL.Path)
	fail := s.failAll || s.failNext > 0
	if s.failNext > 0 {
		s.failNext--
	}
	status := s.status
	s.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	if fail {
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"status_code":%d,"message":"The service is temporarily unavailable.","error":"service_unavailable"}`, status)
		return
	}
	if !s.authorized(r) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"status_code":401,"message":"Unauthorized","error":"unauthorized"}`)
		return
	}
	id, ok := strings.CutPrefix(r.URL.Path, "/appointments/")
	if r.Method != http.MethodGet || !ok {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"status_code":404,"message":"Not found","error":"not_found"}`)
		return
	}
	s.mu.Lock()
	doc, known := s.docs[id]
	s.mu.Unlock()
	if !known {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"status_code":404,"message":"Appointment not found.","error":"not_found"}`)
		return
	}
	_, _ = w.Write(doc)
}

func (s *Server) authorized(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	if !ok || user != s.UserID {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.keys {
		if subtle.ConstantTimeCompare([]byte(k), []byte(pass)) == 1 {
			return true
		}
	}
	return false
}
