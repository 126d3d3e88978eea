package calendlyapi

import (
	"encoding/json"
	"net/http"
	"strings"
)

// delivery is a Calendly webhook body: the invitee it carries embeds its scheduled event.
type delivery struct {
	Event   string `json:"event"`
	Payload *struct {
		Invitee
		ScheduledEvent *Event `json:"scheduled_event"`
	} `json:"payload"`
}

// postDelivery records what a webhook body says about an invitee and its scheduled event, so that a
// sync afterwards reads the same facts the webhook announced (POST /_fake/deliveries, 204).
func (s *Server) postDelivery(w http.ResponseWriter, r *http.Request) {
	var d delivery
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&d); err != nil {
		http.Error(w, "body is not a Calendly webhook envelope: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !strings.HasPrefix(d.Event, "invitee") || d.Payload == nil || d.Payload.ScheduledEvent == nil ||
		d.Payload.URI == "" || d.Payload.ScheduledEvent.URI == "" {
		http.Error(w, "not an invitee event with its scheduled_event", http.StatusBadRequest)
		return
	}
	inv, ev := d.Payload.Invitee, *d.Payload.ScheduledEvent
	if inv.Event == "" {
		inv.Event = ev.URI
	}
	if d.Event == "invitee_no_show.deleted" {
		inv.NoShow = nil
	}
	s.mu.Lock()
	if _, ok := s.events[ev.URI]; !ok {
		s.order = append(s.order, ev.URI)
	}
	s.events[ev.URI] = &ev
	if _, ok := s.invitees[inv.URI]; !ok {
		s.byEvent[inv.Event] = append(s.byEvent[inv.Event], inv.URI)
	}
	s.invitees[inv.URI] = &inv
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}
