package calendlyapi

import (
	"net/http"
	"slices"
	"strings"
	"time"
)

func (s *Server) getMe(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"resource": map[string]any{
		"uri":                  s.me,
		"name":                 "Dev Host",
		"slug":                 "dev-host",
		"email":                "host@example.com",
		"timezone":             "UTC",
		"current_organization": s.org,
		"resource_type":        "User",
	}})
}

// listEvents is GET /scheduled_events: organization (admins and owners only) or user (alone, only
// the token's own), the start-time window, status, sort by start time.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	org, user := q.Get("organization"), q.Get("user")
	switch {
	case org == "" && user == "":
		invalidArgument(w, "organization", "organization or user is required")
		return
	case org != "" && org != s.org:
		permissionDenied(w, "You do not have permission to access this resource.")
		return
	case org != "" && s.cfg.Member:
		permissionDenied(w, "You do not have permission to access this resource.")
		return
	case org == "" && user != s.me:
		permissionDenied(w, "Please also specify organization when requesting events for a user within your organization.")
		return
	}
	minStart, ok := timeParam(w, r, "min_start_time")
	if !ok {
		return
	}
	maxStart, ok := timeParam(w, r, "max_start_time")
	if !ok {
		return
	}
	status := q.Get("status")
	if status != "" && status != "active" && status != "canceled" {
		invalidArgument(w, "status", "must be one of active, canceled")
		return
	}
	desc := false
	switch q.Get("sort") {
	case "", "start_time:asc":
	case "start_time:desc":
		desc = true
	default:
		invalidArgument(w, "sort", "must be start_time:asc or start_time:desc")
		return
	}
	count, offset, ok := pageQuery(w, r)
	if !ok {
		return
	}

	s.mu.Lock()
	var list []Event
	for _, uri := range s.order {
		ev := s.events[uri]
		start, _ := time.Parse(time.RFC3339Nano, ev.StartTime)
		if (status != "" && ev.Status != status) || (user != "" && !hostedBy(ev, user)) ||
			(!minStart.IsZero() && start.Before(minStart)) || (!maxStart.IsZero() && !start.Before(maxStart)) {
			continue
		}
		list = append(list, *ev)
	}
	s.mu.Unlock()
	slices.SortStableFunc(list, func(a, b Event) int {
		c := strings.Compare(startKey(a), startKey(b))
		if desc {
			c = -c
		}
		return c
	})
	items, p := page(s, r, list, count, offset)
	writeJSON(w, http.StatusOK, map[string]any{"collection": nonNil(items), "pagination": p})
}

func (s *Server) getEvent(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ev, ok := s.events[s.cfg.URIBase+"/scheduled_events/"+r.PathValue("uuid")]
	var out Event
	if ok {
		out = *ev
	}
	s.mu.Unlock()
	if !ok {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"resource": out})
}

// listInvitees is GET /scheduled_events/{uuid}/invitees: status, sort by creation, paging.
func (s *Server) listInvitees(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	if status != "" && status != "active" && status != "canceled" {
		invalidArgument(w, "status", "must be one of active, canceled")
		return
	}
	desc := false
	switch q.Get("sort") {
	case "", "created_at:asc":
	case "created_at:desc":
		desc = true
	default:
		invalidArgument(w, "sort", "must be created_at:asc or created_at:desc")
		return
	}
	count, offset, ok := pageQuery(w, r)
	if !ok {
		return
	}
	uri := s.cfg.URIBase + "/scheduled_events/" + r.PathValue("uuid")
	s.mu.Lock()
	_, known := s.events[uri]
	var list []Invitee
	for _, iu := range s.byEvent[uri] {
		if inv := s.invitees[iu]; status == "" || inv.Status == status {
			list = append(list, *inv)
		}
	}
	s.mu.Unlock()
	if !known {
		notFound(w)
		return
	}
	if desc {
		slices.Reverse(list)
	}
	items, p := page(s, r, list, count, offset)
	writeJSON(w, http.StatusOK, map[string]any{"collection": nonNil(items), "pagination": p})
}

func (s *Server) getInvitee(w http.ResponseWriter, r *http.Request) {
	uri := s.cfg.URIBase + "/scheduled_events/" + r.PathValue("uuid") + "/invitees/" + r.PathValue("invitee")
	inv, ok := s.Invitee(uri)
	if !ok {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"resource": inv})
}

func timeParam(w http.ResponseWriter, r *http.Request, name string) (time.Time, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		invalidArgument(w, name, "must be a UTC time such as 2020-01-02T03:04:05.678123Z")
		return time.Time{}, false
	}
	return t, true
}

func hostedBy(ev *Event, user string) bool {
	return slices.ContainsFunc(ev.EventMemberships, func(m Membership) bool { return m.User == user })
}

// startKey orders events by start time, then URI, so that equal starts page stably.
func startKey(ev Event) string {
	t, _ := time.Parse(time.RFC3339Nano, ev.StartTime)
	return Format(t) + " " + ev.URI
}

// nonNil makes an empty page encode as [] as Calendly's does, never null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
