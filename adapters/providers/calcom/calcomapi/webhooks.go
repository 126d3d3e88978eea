package calcomapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
)

// Webhook is one webhook of the API key's user.
type Webhook struct {
	ID            string
	SubscriberURL string
	Triggers      []string
	Active        bool
	Secret        string
}

func (h Webhook) json() map[string]any {
	out := map[string]any{
		"id": h.ID, "subscriberUrl": h.SubscriberURL, "triggers": slices.Clone(h.Triggers),
		"active": h.Active, "payloadTemplate": nil,
	}
	if h.Secret != "" {
		out["secret"] = h.Secret
	}
	return out
}

// Webhooks returns the webhooks in creation order.
func (s *Server) Webhooks() []Webhook {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Webhook, len(s.hooks))
	for i, h := range s.hooks {
		out[i] = *h
		out[i].Triggers = slices.Clone(h.Triggers)
	}
	return out
}

// DisableWebhook sets a webhook inactive, as its owner can in Cal.com's settings.
func (s *Server) DisableWebhook(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hook(id)
	if h == nil {
		return fmt.Errorf("calcom api fake: no webhook %q", id)
	}
	h.Active = false
	return nil
}

func (s *Server) hook(id string) *Webhook {
	for _, h := range s.hooks {
		if h.ID == id {
			return h
		}
	}
	return nil
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	take, skip := 250, 0
	var err error
	if v := r.URL.Query().Get("take"); v != "" {
		if take, err = strconv.Atoi(v); err != nil || take < 1 || take > 250 {
			writeError(w, r, http.StatusBadRequest, "BadRequestException", "take must be an integer from 1 to 250")
			return
		}
	}
	if v := r.URL.Query().Get("skip"); v != "" {
		if skip, err = strconv.Atoi(v); err != nil || skip < 0 {
			writeError(w, r, http.StatusBadRequest, "BadRequestException", "skip must not be less than 0")
			return
		}
	}
	hooks := s.Webhooks()
	page := hooks[min(skip, len(hooks)):min(skip+take, len(hooks))]
	out := make([]any, len(page))
	for i, h := range page {
		out[i] = h.json()
	}
	writeData(w, http.StatusOK, out)
}

// webhookInput is the body of POST and PATCH; pointers tell a missing field from a zero one.
type webhookInput struct {
	SubscriberURL *string   `json:"subscriberUrl"`
	Triggers      *[]string `json:"triggers"`
	Active        *bool     `json:"active"`
	Secret        *string   `json:"secret"`
}

func readWebhookInput(w http.ResponseWriter, r *http.Request) (webhookInput, bool) {
	var in webhookInput
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, r, http.StatusBadRequest, "BadRequestException", "body is not JSON")
		return in, false
	}
	if in.Triggers != nil && len(*in.Triggers) == 0 {
		writeError(w, r, http.StatusBadRequest, "BadRequestException", "triggers should not be empty")
		return in, false
	}
	return in, true
}

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) {
	in, ok := readWebhookInput(w, r)
	if !ok {
		return
	}
	if in.SubscriberURL == nil || *in.SubscriberURL == "" || in.Triggers == nil || in.Active == nil {
		writeError(w, r, http.StatusBadRequest, "BadRequestException", "subscriberUrl, triggers and active are required")
		return
	}
	s.mu.Lock()
	h := &Webhook{
		ID:            fmt.Sprintf("wh_%04d", len(s.hooks)+1),
		SubscriberURL: *in.SubscriberURL, Triggers: slices.Clone(*in.Triggers), Active: *in.Active,
	}
	if in.Secret != nil {
		h.Secret = *in.Secret
	}
	s.hooks = append(s.hooks, h)
	out := h.json()
	s.mu.Unlock()
	writeData(w, http.StatusCreated, out)
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.hook(r.PathValue("id"))
	var out map[string]any
	if h != nil {
		out = h.json()
	}
	s.mu.Unlock()
	if h == nil {
		writeError(w, r, http.StatusNotFound, "NotFoundException", "Webhook not found")
		return
	}
	writeData(w, http.StatusOK, out)
}

func (s *Server) patchWebhook(w http.ResponseWriter, r *http.Request) {
	in, ok := readWebhookInput(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	h := s.hook(r.PathValue("id"))
	var out map[string]any
	if h != nil {
		if in.SubscriberURL != nil {
			h.SubscriberURL = *in.SubscriberURL
		}
		if in.Triggers != nil {
			h.Triggers = slices.Clone(*in.Triggers)
		}
		if in.Active != nil {
			h.Active = *in.Active
		}
		if in.Secret != nil {
			h.Secret = *in.Secret
		}
		out = h.json()
	}
	s.mu.Unlock()
	if h == nil {
		writeError(w, r, http.StatusNotFound, "NotFoundException", "Webhook not found")
		return
	}
	writeData(w, http.StatusOK, out)
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	i := slices.IndexFunc(s.hooks, func(h *Webhook) bool { return h.ID == r.PathValue("id") })
	var out map[string]any
	if i >= 0 {
		out = s.hooks[i].json()
		s.hooks = slices.Delete(s.hooks, i, i+1)
	}
	s.mu.Unlock()
	if i < 0 {
		writeError(w, r, http.StatusNotFound, "NotFoundException", "Webhook not found")
		return
	}
	writeData(w, http.StatusOK, out)
}

// disable answers POST /_fake/subscriptions/{id}/disable.
func (s *Server) disable(w http.ResponseWriter, r *http.Request) {
	if err := s.DisableWebhook(r.PathValue("id")); err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
