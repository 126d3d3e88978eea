package calendlyapi

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// webhookEvents are the event names a subscription may ask for (those the fake knows of).
var webhookEvents = []string{
	"invitee.created", "invitee.canceled", "invitee_no_show.created", "invitee_no_show.deleted",
	"routing_form_submission.created", "event_type.created", "event_type.updated", "event_type.deleted",
}

// Subscriptions returns every subscription the fake holds, in creation order.
func (s *Server) Subscriptions() []Subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Subscription, 0, len(s.subsOrder))
	for _, uri := range s.subsOrder {
		out = append(out, *s.subs[uri])
	}
	return out
}

// DisableSubscription does what Calendly does after 24 hours of failed deliveries: the subscription
// stays listed with state "disabled" and retry_started_at a day ago. uuidOrURI names it either way.
func (s *Server) DisableSubscription(uuidOrURI string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, ok := s.subs[uuidOrURI]
	if !ok {
		sub, ok = s.subs[s.cfg.URIBase+"/webhook_subscriptions/"+uuidOrURI]
	}
	if !ok {
		return fmt.Errorf("%w: subscription %s", ErrUnknown, uuidOrURI)
	}
	now := s.cfg.Now()
	sub.State, sub.UpdatedAt = "disabled", Format(now)
	sub.RetryStartedAt = ptr(Format(now.Add(-24 * time.Hour)))
	return nil
}

// listSubscriptions is GET /webhook_subscriptions: organization and scope always, user with scope
// user; an organization scope needs an admin.
func (s *Server) listSubscriptions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	scope, user, ok := s.subscriptionScope(w, q.Get("organization"), q.Get("scope"), q.Get("user"))
	if !ok {
		return
	}
	count, offset, ok := pageQuery(w, r)
	if !ok {
		return
	}
	var list []Subscription
	for _, sub := range s.Subscriptions() {
		if sub.Scope == scope && (scope != "user" || (sub.User != nil && *sub.User == user)) {
			list = append(list, sub)
		}
	}
	if q.Get("sort") == "created_at:desc" {
		slices.Reverse(list)
	}
	items, p := page(s, r, list, count, offset)
	writeJSON(w, http.StatusOK, map[string]any{"collection": nonNil(items), "pagination": p})
}

// subscriptionScope checks the organization, scope and user of a list or create; on a refusal it has
// answered.
func (s *Server) subscriptionScope(w http.ResponseWriter, org, scope, user string) (string, string, bool) {
	switch {
	case s.cfg.FreePlan:
		permissionDenied(w, "Please upgrade your Calendly account to Professional")
	case org == "":
		invalidArgument(w, "organization", "is required")
	case scope != "user" && scope != "organization":
		invalidArgument(w, "scope", "must be one of user, organization, group")
	case scope == "user" && user == "":
		invalidArgument(w, "user", "is required when scope is user")
	case org != s.org, scope == "organization" && s.cfg.Member, scope == "user" && user != s.me && s.cfg.Member:
		permissionDenied(w, "You do not have permission to access this resource.")
	default:
		return scope, user, true
	}
	return "", "", false
}

type createRequest struct {
	URL          string   `json:"url"`
	Events       []string `json:"events"`
	Organization string   `json:"organization"`
	Scope        string   `json:"scope"`
	User         string   `json:"user"`
	SigningKey   string   `json:"signing_key"`
}

// createSubscription is POST /webhook_subscriptions: 201 {"resource": …}. A second subscription for
// the same callback URL and scope (and user) is refused with 409.
func (s *Server) createSubscription(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "Invalid Argument", "The request body is not valid JSON.")
		return
	}
	if u, err := url.Parse(req.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		invalidArgument(w, "url", "must be a valid URL")
		return
	}
	if len(req.Events) == 0 || slices.ContainsFunc(req.Events, func(e string) bool { return !slices.Contains(webhookEvents, e) }) {
		invalidArgument(w, "events", "must name one or more supported events")
		return
	}
	scope, user, ok := s.subscriptionScope(w, req.Organization, req.Scope, req.User)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sub := range s.subs {
		if sub.CallbackURL == req.URL && sub.Scope == scope && (scope != "user" || *sub.User == user) {
			writeError(w, http.StatusConflict, "Already Exists", "Hook with this url already exists")
			return
		}
	}
	key := req.SigningKey
	if key == "" {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		key = hex.EncodeToString(b)
	}
	now := Format(s.cfg.Now())
	sub := &Subscription{
		URI: s.cfg.URIBase + "/webhook_subscriptions/" + s.newID("WHK"), CallbackURL: req.URL,
		CreatedAt: now, UpdatedAt: now, State: "active", Events: slices.Clone(req.Events),
		Scope: scope, Organization: s.org, Creator: s.me, SigningKey: key,
	}
	if scope == "user" {
		sub.User = ptr(user)
	}
	s.subs[sub.URI] = sub
	s.subsOrder = append(s.subsOrder, sub.URI)
	writeJSON(w, http.StatusCreated, map[string]any{"resource": *sub})
}

func (s *Server) getSubscription(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	sub, ok := s.subs[s.cfg.URIBase+"/webhook_subscriptions/"+r.PathValue("uuid")]
	var out Subscription
	if ok {
		out = *sub
	}
	s.mu.Unlock()
	if !ok {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"resource": out})
}

func (s *Server) deleteSubscription(w http.ResponseWriter, r *http.Request) {
	uri := s.cfg.URIBase + "/webhook_subscriptions/" + r.PathValue("uuid")
	s.mu.Lock()
	_, ok := s.subs[uri]
	delete(s.subs, uri)
	s.subsOrder = slices.DeleteFunc(s.subsOrder, func(u string) bool { return u == uri })
	s.mu.Unlock()
	if !ok {
		notFound(w)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// postDisable is POST /_fake/subscriptions/{uuid}/disable; the uuid "all" disables every
// subscription (the README tour: a day of failed deliveries to this deployment).
func (s *Server) postDisable(w http.ResponseWriter, r *http.Request) {
	if id := r.PathValue("uuid"); id == "all" {
		for _, sub := range s.Subscriptions() {
			_ = s.DisableSubscription(sub.URI)
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err := s.DisableSubscription(r.PathValue("uuid")); err != nil {
		notFound(w)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
