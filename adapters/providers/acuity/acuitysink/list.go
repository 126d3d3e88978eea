package acuitysink

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultMax is how many appointments a list answers when max is not given.
const DefaultMax = 100

// list answers GET /appointments: the appointments the sink knows (fetched, set or delivered) whose
// start date (UTC) is within minDate and maxDate, canceled ones only with canceled=true (only them)
// or showall=true (both), at most max, by start, newest first unless direction=ASC.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	minDate, okMin := date(q, "minDate")
	maxDate, okMax := date(q, "maxDate")
	limit, okMax2 := maxParam(q)
	if !okMin || !okMax || !okMax2 {
		writeError(w, http.StatusBadRequest, "invalid_request", "minDate and maxDate are dates (2026-12-02); max is a positive number.")
		s.report(r, http.StatusBadRequest, 0)
		return
	}
	showall, canceled := q.Get("showall") == "true", q.Get("canceled") == "true"
	type entry struct {
		id string
		a  Appointment
	}
	s.mu.Lock()
	ids := make([]string, 0, len(s.known))
	for id := range s.known {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	var found []entry
	for _, id := range ids {
		a, ok := s.lookup(id)
		day := a.Start.UTC().Truncate(24 * time.Hour)
		switch {
		case !ok,
			!minDate.IsZero() && day.Before(minDate),
			!maxDate.IsZero() && day.After(maxDate),
			!showall && a.Canceled != canceled,
			q.Has("calendarID") && q.Get("calendarID") != strconv.FormatInt(a.CalendarID, 10):
			continue
		}
		found = append(found, entry{id, a})
	}
	asc := strings.EqualFold(q.Get("direction"), "ASC")
	slices.SortFunc(found, func(x, y entry) int {
		c := x.a.Start.Compare(y.a.Start)
		if c == 0 {
			c = strings.Compare(x.id, y.id)
		}
		if !asc {
			c = -c
		}
		return c
	})
	found = found[:min(limit, len(found))]
	docs := make([]map[string]any, len(found))
	for i, e := range found {
		docs[i] = document(e.id, e.a)
	}
	writeJSON(w, http.StatusOK, docs)
	s.report(r, http.StatusOK, len(docs))
}

func date(q url.Values, key string) (time.Time, bool) {
	if !q.Has(key) {
		return time.Time{}, true
	}
	t, err := time.Parse(time.DateOnly, q.Get(key))
	return t, err == nil
}

func maxParam(q url.Values) (int, bool) {
	if !q.Has("max") {
		return DefaultMax, true
	}
	n, err := strconv.Atoi(q.Get("max"))
	return n, err == nil && n > 0
}

// deliver takes the body `bookingledger send acuity` builds (action, id, …) and plays the change at
// Acuity that the webhook announces, without sending it anywhere: the appointment is registered
// (scheduled, changed), moved one day later (rescheduled) or canceled. The provider sync finds it.
func (s *Server) deliver(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
		return
	}
	id := r.PostForm.Get("id")
	a, ok := s.lookup(id)
	if !ok {
		http.Error(w, "appointment ids are positive integers", http.StatusBadRequest)
		return
	}
	switch strings.TrimPrefix(r.PostForm.Get("action"), "appointment.") {
	case "scheduled", "changed":
	case "rescheduled":
		a.Start = a.Start.Add(24 * time.Hour)
	case "canceled":
		a.Canceled = true
	default:
		http.Error(w, "action must be scheduled, rescheduled, canceled or changed", http.StatusBadRequest)
		return
	}
	s.Put(id, a)
	if s.cfg.OnPut != nil {
		s.cfg.OnPut(id, a)
	}
	w.WriteHeader(http.StatusNoContent)
}
