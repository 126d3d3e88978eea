package calendlyapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrUnknown: a seeding method named an invitee, event or subscription the fake does not hold, or
// one in a state the change does not apply to (canceling a canceled invitee).
var ErrUnknown = errors.New("calendly api fake: no such resource in that state")

// Booking is what Schedule and Join need to seed an invitee.
type Booking struct {
	// Hosts are the hosts' user URIs (default: the token's user).
	Hosts []string
	// Start and End are the meeting's times; Limit its invitees_counter.limit (default 1).
	Start, End time.Time
	Limit      int
	// Name and Email are the invitee's; CreatedAt when they booked (default: the fake's clock).
	Name, Email string
	CreatedAt   time.Time
	Payment     *Payment
}

// Schedule seeds a new scheduled event with one invitee and returns the invitee.
func (s *Server) Schedule(b Booking) Invitee {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := s.at(b.CreatedAt)
	ev := s.newEvent(b, at)
	return *s.addInvitee(ev, b, at, nil)
}

// Join seeds another invitee of the scheduled event eventURI (a group event).
func (s *Server) Join(eventURI string, b Booking) (Invitee, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev, ok := s.events[eventURI]
	if !ok || ev.Status != "active" {
		return Invitee{}, fmt.Errorf("%w: event %s", ErrUnknown, eventURI)
	}
	return *s.addInvitee(ev, b, s.at(b.CreatedAt), nil), nil
}

// Cancel cancels an active invitee at `at` (zero: the fake's clock); canceler is "host" or
// "invitee". A one-to-one event is canceled with its invitee.
func (s *Server) Cancel(inviteeURI, canceler, reason string, at time.Time) (Invitee, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	inv, err := s.cancel(inviteeURI, canceler, reason, s.at(at))
	if err != nil {
		return Invitee{}, err
	}
	return *inv, nil
}

// Reschedule moves an active invitee to a new scheduled event at start–end, as Calendly does: the
// old invitee is canceled with rescheduled=true and new_invitee, the new one carries old_invitee.
func (s *Server) Reschedule(inviteeURI string, start, end, at time.Time) (old, moved Invitee, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at = s.at(at)
	prev, ok := s.invitees[inviteeURI]
	if !ok || prev.Status != "active" {
		return Invitee{}, Invitee{}, fmt.Errorf("%w: active invitee %s", ErrUnknown, inviteeURI)
	}
	from := s.events[prev.Event]
	b := Booking{Start: start, End: end, Limit: from.InviteesCounter.Limit, Name: prev.Name, Email: prev.Email, Payment: prev.Payment}
	for _, m := range from.EventMemberships {
		b.Hosts = append(b.Hosts, m.User)
	}
	next := s.addInvitee(s.newEvent(b, at), b, at, &prev.URI)
	canceled, err := s.cancel(inviteeURI, "invitee", "", at)
	if err != nil {
		return Invitee{}, Invitee{}, err
	}
	canceled.Rescheduled, canceled.NewInvitee = true, ptr(next.URI)
	return *canceled, *next, nil
}

// MarkNoShow marks an invitee as a no-show at `at` (zero: the fake's clock).
func (s *Server) MarkNoShow(inviteeURI string, at time.Time) (Invitee, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	inv, ok := s.invitees[inviteeURI]
	if !ok {
		return Invitee{}, fmt.Errorf("%w: invitee %s", ErrUnknown, inviteeURI)
	}
	stamp := Format(s.at(at))
	inv.NoShow = &NoShow{URI: s.cfg.URIBase + "/invitee_no_shows/" + s.newID("NOS"), CreatedAt: stamp}
	return *inv, nil
}

// Invitee returns the invitee as the fake holds it.
func (s *Server) Invitee(uri string) (Invitee, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	inv, ok := s.invitees[uri]
	if !ok {
		return Invitee{}, false
	}
	return *inv, true
}

// Event returns the scheduled event as the fake holds it.
func (s *Server) Event(uri string) (Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev, ok := s.events[uri]
	if !ok {
		return Event{}, false
	}
	return *ev, true
}

func (s *Server) at(t time.Time) time.Time {
	if t.IsZero() {
		return s.cfg.Now().UTC()
	}
	return t.UTC()
}

func (s *Server) newEvent(b Booking, at time.Time) *Event {
	hosts := b.Hosts
	if len(hosts) == 0 {
		hosts = []string{s.me}
	}
	ev := &Event{
		URI:             s.cfg.URIBase + "/scheduled_events/" + s.newID("EVT"),
		Name:            "30 Minute Meeting",
		Status:          "active",
		StartTime:       Format(b.Start),
		EndTime:         Format(b.End),
		EventType:       s.cfg.URIBase + "/event_types/DEVEVENTTYPE0001",
		Location:        json.RawMessage(`{"type":"zoom","status":"pushed","join_url":"https://calendly.zoom.us/j/1"}`),
		InviteesCounter: Counter{Limit: max(b.Limit, 1)},
		CreatedAt:       Format(at),
		UpdatedAt:       Format(at),
		EventGuests:     []json.RawMessage{},
	}
	for _, h := range hosts {
		ev.EventMemberships = append(ev.EventMemberships, Membership{User: h})
	}
	s.events[ev.URI] = ev
	s.order = append(s.order, ev.URI)
	return ev
}

func (s *Server) addInvitee(ev *Event, b Booking, at time.Time, old *string) *Invitee {
	key := s.newID("INV")
	inv := &Invitee{
		URI:                 ev.URI + "/invitees/" + key,
		Event:               ev.URI,
		Email:               b.Email,
		Name:                b.Name,
		Status:              "active",
		Timezone:            "UTC",
		CreatedAt:           Format(at),
		UpdatedAt:           Format(at),
		OldInvitee:          old,
		CancelURL:           "https://calendly.com/cancellations/" + key,
		RescheduleURL:       "https://calendly.com/reschedulings/" + key,
		QuestionsAndAnswers: []json.RawMessage{},
		Payment:             b.Payment,
	}
	s.invitees[inv.URI] = inv
	s.byEvent[ev.URI] = append(s.byEvent[ev.URI], inv.URI)
	ev.InviteesCounter.Total++
	ev.InviteesCounter.Active++
	ev.UpdatedAt = Format(at)
	return inv
}

func (s *Server) cancel(inviteeURI, canceler, reason string, at time.Time) (*Invitee, error) {
	inv, ok := s.invitees[inviteeURI]
	if !ok || inv.Status != "active" {
		return nil, fmt.Errorf("%w: active invitee %s", ErrUnknown, inviteeURI)
	}
	stamp := Format(at)
	by := inv.Name
	if canceler == "host" {
		by = "Host"
	}
	inv.Status, inv.UpdatedAt = "canceled", stamp
	inv.Cancellation = &Cancellation{CanceledBy: by, Reason: reason, CancelerType: canceler, CreatedAt: stamp}
	ev := s.events[inv.Event]
	ev.InviteesCounter.Active--
	ev.UpdatedAt = stamp
	if ev.InviteesCounter.Active == 0 && ev.InviteesCounter.Limit == 1 {
		ev.Status = "canceled"
		ev.Cancellation = inv.Cancellation
	}
	return inv, nil
}
