package acuitysink

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
)

// MaxWebhooks is how many dynamic webhooks one Acuity account may have.
const MaxWebhooks = 25

// webhookEvents are the events Acuity's dynamic webhooks take.
var webhookEvents = []string{"appointment.scheduled", "appointment.rescheduled", "appointment.canceled", "appointment.changed", "order.completed"}

// webhook is one dynamic webhook subscription. The sink sends nothing to it.
type webhook struct {
	ID     int    `json:"id"`
	Event  string `json:"event"`
	Target string `json:"target"`
	Status string `json:"status"`
}

// listWebhooks answers GET /webhooks: the active subscriptions (Acuity lists no other).
func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	out := slices.Clone(s.webhooks)
	s.mu.Unlock()
	if out == nil {
		out = []webhook{}
	}
	writeJSON(w, http.StatusOK, out)
	s.report(r, http.StatusOK, 0)
}

// createWebhook answers POST /webhooks {"event","target"}: a known event, a target on port 80 or
// 443, at most MaxWebhooks.
func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Event  string `json:"event"`
		Target string `json:"target"`
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	status, msg := http.StatusOK, ""
	switch err := json.NewDecoder(r.Body).Decode(&in); {
	case err != nil:
		status, msg = http.StatusBadRequest, "The request body is not valid JSON."
	case !slices.Contains(webhookEvents, in.Event):
		status, msg = http.StatusBadRequest, "Invalid event "+strconv.Quote(in.Event)+"."
	case !validTarget(in.Target):
		status, msg = http.StatusBadRequest, "The target must be an http(s) URL on port 80 or 443."
	}
	s.mu.Lock()
	if status == http.StatusOK && len(s.webhooks) >= MaxWebhooks {
		status, msg = http.StatusBadRequest, "You have reached the maximum of 25 webhooks."
	}
	var created webhook
	if status == http.StatusOK {
		s.nextHook++
		created = webhook{ID: s.nextHook, Event: in.Event, Target: in.Target, Status: "active"}
		s.webhooks = append(s.webhooks, created)
	}
	s.mu.Unlock()
	if status != http.StatusOK {
		writeError(w, status, "invalid_webhook", msg)
	} else {
		writeJSON(w, status, created)
	}
	s.report(r, status, 0)
}

// deleteWebhook answers DELETE /webhooks/{id}.
func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.Atoi(r.PathValue("id"))
	s.mu.Lock()
	i := slices.IndexFunc(s.webhooks, func(h webhook) bool { return h.ID == id })
	if i >= 0 {
		s.webhooks = slices.Delete(s.webhooks, i, i+1)
	}
	s.mu.Unlock()
	if i < 0 {
		writeError(w, http.StatusNotFound, "not_found", "Webhook not found.")
		s.report(r, http.StatusNotFound, 0)
		return
	}
	w.WriteHeader(http.StatusNoContent)
	s.report(r, http.StatusNoContent, 0)
}

func validTarget(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return false
	}
	switch u.Scheme + ":" + u.Port() {
	case "https:", "https:443", "http:", "http:80", "https:80", "http:443":
		return true
	}
	return false
}
