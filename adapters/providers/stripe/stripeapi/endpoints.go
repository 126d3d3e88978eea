package stripeapi

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// endpoint is one webhook endpoint of the account.
type endpoint struct {
	id      string
	url     string
	events  []string
	status  string // "enabled" or "disabled"
	created int64
	secret  string
}

// json renders the endpoint as Stripe does; the secret only when asked (the create answer).
func (e *endpoint) json(withSecret bool) map[string]any {
	doc := map[string]any{
		"id": e.id, "object": "webhook_endpoint", "api_version": nil, "application": nil, "created": e.created,
		"description": nil, "enabled_events": e.events, "livemode": false, "metadata": map[string]string{},
		"status": e.status, "url": e.url,
	}
	if withSecret {
		doc["secret"] = e.secret
	}
	return doc
}

// replay is a create answer kept for its Idempotency-Key.
type replay struct {
	params string
	status int
	doc    map[string]any
}

// Disable plays Stripe disabling an endpoint: events created from now on are not sent to it, ever.
func (s *Server) Disable(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.endpoint(id)
	if e == nil {
		return fmt.Errorf("stripe API fake: no webhook endpoint %q", id)
	}
	e.status = "disabled"
	return nil
}

// Endpoint is a webhook endpoint as the fake holds it, for tests.
type Endpoint struct {
	ID, URL, Status string
	Events          []string
}

// Endpoints lists the account's webhook endpoints, oldest first.
func (s *Server) Endpoints() []Endpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Endpoint, 0, len(s.endpoints))
	for _, e := range s.endpoints {
		out = append(out, Endpoint{ID: e.id, URL: e.url, Status: e.status, Events: slices.Clone(e.events)})
	}
	return out
}

func (s *Server) endpoint(id string) *endpoint {
	for _, e := range s.endpoints {
		if e.id == id {
			return e
		}
	}
	return nil
}

// listEndpoints answers GET /v1/webhook_endpoints, newest first.
func (s *Server) listEndpoints(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if bad := unknownParam(q, "limit", "starting_after", "ending_before", "expand[]"); bad != "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_unknown", "Received unknown parameter: "+bad)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.endpoints))
	for i := len(s.endpoints) - 1; i >= 0; i-- {
		ids = append(ids, s.endpoints[i].id)
	}
	from, to, hasMore, err := page(q, ids, func(id string) bool { return s.endpoint(id) != nil }, "webhook endpoint")
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", err.Error())
		return
	}
	data := make([]map[string]any, 0, to-from)
	for _, id := range ids[from:to] {
		data = append(data, s.endpoint(id).json(false))
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "url": "/v1/webhook_endpoints", "has_more": hasMore, "data": data})
}

func (s *Server) getEndpoint(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.endpoint(r.PathValue("id"))
	if e == nil {
		noSuchEndpoint(w, r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, e.json(false))
}

// createEndpoint answers POST /v1/webhook_endpoints (url and enabled_events[] required). An
// Idempotency-Key seen before replays its first answer, or is refused when the parameters differ.
func (s *Server) createEndpoint(w http.ResponseWriter, r *http.Request) {
	form, ok := readForm(w, r)
	if !ok {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, seen := s.idempotent[key]; key != "" && seen {
		if prev.params != form.Encode() {
			writeError(w, http.StatusBadRequest, "idempotency_error", "",
				"Keys for idempotent requests can only be used with the same parameters they were first used with.")
			return
		}
		writeJSON(w, prev.status, prev.doc)
		return
	}
	status, doc := s.create(form)
	if key != "" {
		s.idempotent[key] = replay{params: form.Encode(), status: status, doc: doc}
	}
	writeJSON(w, status, doc)
}

func (s *Server) create(form url.Values) (int, map[string]any) {
	bad := func(msg string) (int, map[string]any) {
		return http.StatusBadRequest, map[string]any{"error": map[string]string{"type": "invalid_request_error", "message": msg}}
	}
	u, events := form.Get("url"), form["enabled_events[]"]
	switch {
	case u == "":
		return bad("Missing required param: url.")
	case !validURL(u):
		return bad("Invalid URL: " + u)
	case len(events) == 0:
		return bad("Missing required param: enabled_events.")
	case len(s.endpoints) >= MaxEndpoints:
		return bad(fmt.Sprintf("You have reached the maximum of %d test webhook endpoints.", MaxEndpoints))
	}
	e := &endpoint{id: "we_" + randomHex(12), url: u, events: slices.Clone(events), status: "enabled",
		created: s.cfg.Now().Unix(), secret: "whsec_" + randomHex(16)}
	s.endpoints = append(s.endpoints, e)
	return http.StatusOK, e.json(true)
}

// updateEndpoint answers POST /v1/webhook_endpoints/{id}: disabled, enabled_events[], url.
func (s *Server) updateEndpoint(w http.ResponseWriter, r *http.Request) {
	form, ok := readForm(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.endpoint(r.PathValue("id"))
	if e == nil {
		noSuchEndpoint(w, r.PathValue("id"))
		return
	}
	if bad := unknownParam(form, "disabled", "enabled_events[]", "url", "description"); bad != "" {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "parameter_unknown", "Received unknown parameter: "+bad)
		return
	}
	if form.Has("disabled") {
		switch form.Get("disabled") {
		case "true":
			e.status = "disabled"
		case "false":
			e.status = "enabled"
		default:
			writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Invalid boolean: "+form.Get("disabled"))
			return
		}
	}
	if form.Has("url") {
		if !validURL(form.Get("url")) {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Invalid URL: "+form.Get("url"))
			return
		}
		e.url = form.Get("url")
	}
	if evs := form["enabled_events[]"]; len(evs) > 0 {
		e.events = slices.Clone(evs)
	}
	writeJSON(w, http.StatusOK, e.json(false))
}

func (s *Server) deleteEndpoint(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := r.PathValue("id")
	i := slices.IndexFunc(s.endpoints, func(e *endpoint) bool { return e.id == id })
	if i < 0 {
		noSuchEndpoint(w, id)
		return
	}
	s.endpoints = slices.Delete(s.endpoints, i, i+1)
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "webhook_endpoint", "deleted": true})
}

// disableRoute is Disable over HTTP, for the dev sink.
func (s *Server) disableRoute(w http.ResponseWriter, r *http.Request) {
	if err := s.Disable(r.PathValue("id")); err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func readForm(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Stripe takes form-encoded request bodies, not "+ct+".")
		return nil, false
	}
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Invalid request body.")
		return nil, false
	}
	return r.PostForm, true
}

func noSuchEndpoint(w http.ResponseWriter, id string) {
	writeError(w, http.StatusNotFound, "invalid_request_error", "resource_missing", "No such webhook endpoint: '"+id+"'")
}

func validURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
