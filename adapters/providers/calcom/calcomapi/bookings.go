package calcomapi

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// Booking statuses as API v2 spells them.
const (
	StatusAccepted  = "accepted"
	StatusCancelled = "cancelled"
	StatusRejected  = "rejected"
	StatusPending   = "pending"
)

// ErrNoBooking: no booking has the uid.
var ErrNoBooking = errors.New("calcom api fake: no such booking")

// Person is a host or an attendee.
type Person struct {
	ID    int // hosts only
	Name  string
	Email string
}

// Booking is one booking the fake holds. Zero fields of Add take defaults.
type Booking struct {
	UID                string
	Status             string // default StatusAccepted
	Start, End         time.Time
	Host               Person
	Attendees          []Person
	ICSUID             string // default <uid>@Cal.com
	CancellationReason string
	CancelledByEmail   string
	RescheduledFromUID string
	RescheduledToUID   string
	CreatedAt          time.Time // default the fake's now
	UpdatedAt          time.Time // default CreatedAt
	Metadata           map[string]string
	EventTypeID        int

	id int
}

// Add stores b (its uid must be new) and returns it with its defaults.
func (s *Server) Add(b Booking) (Booking, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.add(b)
}

func (s *Server) add(b Booking) (Booking, error) {
	if b.UID == "" || s.byUID[b.UID] != nil {
		return Booking{}, fmt.Errorf("calcom api fake: uid %q is empty or taken", b.UID)
	}
	if !b.End.After(b.Start) {
		return Booking{}, fmt.Errorf("calcom api fake: booking %s ends before it starts", b.UID)
	}
	if b.Status == "" {
		b.Status = StatusAccepted
	}
	if b.ICSUID == "" {
		b.ICSUID = b.UID + "@Cal.com"
	}
	if b.CreatedAt.IsZero() {
		b.CreatedAt = s.cfg.Now()
	}
	if b.UpdatedAt.IsZero() {
		b.UpdatedAt = b.CreatedAt
	}
	b.id = len(s.bookings) + 1
	stored := b
	s.bookings = append(s.bookings, &stored)
	s.byUID[b.UID] = &stored
	return b, nil
}

// Booking returns the booking with uid.
func (s *Server) Booking(uid string) (Booking, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.byUID[uid]
	if !ok {
		return Booking{}, false
	}
	return *b, true
}

// Cancel cancels uid as its host or attendee byEmail would, at the fake's now.
func (s *Server) Cancel(uid, reason, byEmail string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.change(uid, s.cfg.Now(), func(b *Booking) {
		b.Status, b.CancellationReason, b.CancelledByEmail = StatusCancelled, reason, byEmail
	})
}

// Reject refuses a pending booking at the fake's now.
func (s *Server) Reject(uid string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.change(uid, s.cfg.Now(), func(b *Booking) { b.Status = StatusRejected })
}

// Reschedule moves uid to [start, end) as Cal.com does: a new booking newUID, rescheduled from uid,
// with the same ICS uid, and uid cancelled, pointing at it.
func (s *Server) Reschedule(uid, newUID string, start, end time.Time) (Booking, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reschedule(uid, newUID, start, end, s.cfg.Now())
}

func (s *Server) reschedule(uid, newUID string, start, end, at time.Time) (Booking, error) {
	old, ok := s.byUID[uid]
	if !ok {
		return Booking{}, fmt.Errorf("%w: %s", ErrNoBooking, uid)
	}
	nb := *old
	nb.UID, nb.Status, nb.Start, nb.End = newUID, StatusAccepted, start, end
	nb.RescheduledFromUID, nb.RescheduledToUID = uid, ""
	nb.CancellationReason, nb.CancelledByEmail = "", ""
	nb.CreatedAt, nb.UpdatedAt = at, at
	created, err := s.add(nb)
	if err != nil {
		return Booking{}, err
	}
	return created, s.change(uid, at, func(b *Booking) { b.Status, b.RescheduledToUID = StatusCancelled, newUID })
}

func (s *Server) change(uid string, at time.Time, f func(*Booking)) error {
	b, ok := s.byUID[uid]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoBooking, uid)
	}
	f(b)
	b.UpdatedAt = at
	return nil
}

// listBookings answers GET /v2/bookings.
func (s *Server) listBookings(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	take, skip := 100, 0
	var err error
	if v := q.Get("take"); v != "" {
		if take, err = strconv.Atoi(v); err != nil || take < 1 || take > 250 {
			writeError(w, r, http.StatusBadRequest, "BadRequestException", "take must be an integer from 1 to 250")
			return
		}
	}
	if v := q.Get("skip"); v != "" {
		if skip, err = strconv.Atoi(v); err != nil || skip < 0 {
			writeError(w, r, http.StatusBadRequest, "BadRequestException", "skip must not be less than 0")
			return
		}
	}
	f, err := parseFilter(q.Get)
	if err != nil {
		writeError(w, r, http.StatusBadRequest, "BadRequestException", err.Error())
		return
	}
	s.mu.Lock()
	var all []Booking
	for _, b := range s.bookings {
		if f.match(*b) {
			all = append(all, *b)
		}
	}
	s.mu.Unlock()
	f.sort(all)
	page := all[min(skip, len(all)):min(skip+take, len(all))]
	out := make([]map[string]any, len(page))
	for i, b := range page {
		out[i] = b.json()
	}
	if r.Header.Get("cal-api-version") != "2024-08-13" {
		// Cal.com answers an older version without the header; its list is data.bookings.
		writeData(w, http.StatusOK, map[string]any{"bookings": out, "recurringInfo": []any{}, "nextCursor": nil})
		return
	}
	pages := (len(all) + take - 1) / take
	writeJSON(w, http.StatusOK, map[string]any{
		"status": "success",
		"data":   out,
		"pagination": map[string]any{
			"totalItems": len(all), "remainingItems": max(len(all)-skip-len(page), 0), "returnedItems": len(page),
			"itemsPerPage": take, "currentPage": skip/take + 1, "totalPages": pages,
			"hasNextPage": skip+len(page) < len(all), "hasPreviousPage": skip > 0,
		},
	})
}

// getBooking answers GET /v2/bookings/{uid}.
func (s *Server) getBooking(w http.ResponseWriter, r *http.Request) {
	b, ok := s.Booking(r.PathValue("uid"))
	if !ok {
		writeError(w, r, http.StatusNotFound, "NotFoundException", "Booking with uid="+r.PathValue("uid")+" was not found in the database")
		return
	}
	writeData(w, http.StatusOK, b.json())
}

type filter struct {
	afterStart, beforeEnd, afterUpdated time.Time
	uid                                 string
	sortStart, sortUpdated              string
}

func parseFilter(get func(string) string) (filter, error) {
	f := filter{uid: get("bookingUid"), sortStart: get("sortStart"), sortUpdated: get("sortUpdatedAt")}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"afterStart", &f.afterStart}, {"beforeEnd", &f.beforeEnd}, {"afterUpdatedAt", &f.afterUpdated}} {
		v := get(p.name)
		if v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return filter{}, fmt.Errorf("%s must be a valid ISO 8601 date string", p.name)
		}
		*p.dst = t
	}
	for _, v := range []string{f.sortStart, f.sortUpdated} {
		if v != "" && v != "asc" && v != "desc" {
			return filter{}, errors.New("sort values must be one of: asc, desc")
		}
	}
	return f, nil
}

func (f filter) match(b Booking) bool {
	switch {
	case f.uid != "" && b.UID != f.uid,
		!f.afterStart.IsZero() && b.Start.Before(f.afterStart),
		!f.beforeEnd.IsZero() && b.End.After(f.beforeEnd),
		!f.afterUpdated.IsZero() && b.UpdatedAt.Before(f.afterUpdated):
		return false
	}
	return true
}

// sort orders by the requested key, then by id (Cal.com's default order is by id).
func (f filter) sort(bs []Booking) {
	by := func(key func(Booking) time.Time, dir string) func(a, b Booking) int {
		return func(a, b Booking) int {
			c := key(a).Compare(key(b))
			if dir == "desc" {
				c = -c
			}
			if c == 0 {
				c = a.id - b.id
			}
			return c
		}
	}
	switch {
	case f.sortUpdated != "":
		slices.SortStableFunc(bs, by(func(b Booking) time.Time { return b.UpdatedAt }, f.sortUpdated))
	case f.sortStart != "":
		slices.SortStableFunc(bs, by(func(b Booking) time.Time { return b.Start }, f.sortStart))
	default:
		slices.SortStableFunc(bs, func(a, b Booking) int { return a.id - b.id })
	}
}

// json is the booking as GET /v2/bookings (2024-08-13) shows it.
func (b Booking) json() map[string]any {
	hosts := []any{} // a booking whose host user was deleted has none
	if b.Host != (Person{}) {
		hosts = append(hosts, map[string]any{
			"id": b.Host.ID, "name": b.Host.Name, "email": b.Host.Email, "displayEmail": b.Host.Email,
			"username": "user" + strconv.Itoa(b.Host.ID), "timeZone": "Europe/London",
		})
	}
	attendees := make([]any, len(b.Attendees))
	for i, a := range b.Attendees {
		attendees[i] = map[string]any{
			"name": a.Name, "email": a.Email, "displayEmail": a.Email, "timeZone": "Europe/London",
			"language": "en", "absent": false,
		}
	}
	meta := map[string]any{}
	for k, v := range b.Metadata {
		meta[k] = v
	}
	out := map[string]any{
		"id": b.id, "uid": b.UID, "title": "30 Min Meeting", "description": "",
		"hosts": hosts, "status": b.Status,
		"start": b.Start.UTC().Format(millis), "end": b.End.UTC().Format(millis),
		"duration": int(b.End.Sub(b.Start) / time.Minute), "eventTypeId": b.EventTypeID,
		"eventType": map[string]any{"id": b.EventTypeID, "slug": "30min"},
		"location":  "integrations:daily", "absentHost": false,
		"createdAt": b.CreatedAt.UTC().Format(millis), "updatedAt": b.UpdatedAt.UTC().Format(millis),
		"metadata": meta, "icsUid": b.ICSUID, "attendees": attendees, "guests": []any{},
		"bookingFieldsResponses": map[string]any{},
	}
	for k, v := range map[string]string{
		"cancellationReason": b.CancellationReason, "cancelledByEmail": b.CancelledByEmail,
		"rescheduledFromUid": b.RescheduledFromUID, "rescheduledToUid": b.RescheduledToUID,
	} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}
