package calendly

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"bookingledger/adapters/providers"
)

// WebhookEvents are the events Connect subscribes to: the ones Map maps.
func WebhookEvents() []string {
	return []string{EventInviteeCreated, EventInviteeCanceled, EventNoShowCreated, EventNoShowDeleted}
}

const subscriptionsPath = "/webhook_subscriptions"

// apiSubscription is a webhook subscription as Calendly lists it.
type apiSubscription struct {
	URI            string   `json:"uri"`
	CallbackURL    string   `json:"callback_url"`
	Events         []string `json:"events"`
	State          string   `json:"state"`
	Scope          string   `json:"scope"`
	RetryStartedAt *string  `json:"retry_started_at"`
}

func (s apiSubscription) subscription() providers.Subscription {
	out := providers.Subscription{ID: s.URI, URL: s.CallbackURL, Events: s.Events, State: providers.SubscriptionDisabled}
	detail := "scope " + s.Scope
	switch s.State {
	case "active":
		out.State = providers.SubscriptionActive
	case "disabled":
	default:
		detail += "; state " + providers.Clip(s.State)
	}
	if s.RetryStartedAt != nil && *s.RetryStartedAt != "" {
		// Calendly disables a subscription after 24 hours of failed deliveries.
		detail += "; retrying since " + providers.Clip(*s.RetryStartedAt)
	}
	out.Detail = detail
	return out
}

// complete reports an active subscription with every event Map maps.
func (s apiSubscription) complete() bool {
	if s.State != "active" {
		return false
	}
	for _, e := range WebhookEvents() {
		if !slices.Contains(s.Events, e) {
			return false
		}
	}
	return true
}

// List returns the webhook subscriptions of the organization (scope organization) when the token's
// user is an admin, else the user's own (scope user).
func (a *API) List(ctx context.Context) ([]providers.Subscription, error) {
	subs, err := a.subscriptions(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]providers.Subscription, len(subs))
	for i, s := range subs {
		out[i] = s.subscription()
	}
	return out, nil
}

func (a *API) subscriptions(ctx context.Context) ([]apiSubscription, error) {
	byOrg := func(o owner) url.Values {
		return url.Values{"organization": {o.org}, "scope": {"organization"}}
	}
	byUser := func(o owner) url.Values {
		return url.Values{"organization": {o.org}, "scope": {"user"}, "user": {o.me}}
	}
	var subs []apiSubscription
	err := a.scopedPages(ctx, subscriptionsPath, byOrg, byUser, func(page []json.RawMessage) error {
		for _, raw := range page {
			var s apiSubscription
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("%w: calendly webhook subscription: %v", providers.ErrAPIResponse, err)
			}
			subs = append(subs, s)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("calendly: list webhook subscriptions: %w", err)
	}
	return subs, nil
}

// Connect makes sure an active subscription for callback with WebhookEvents exists. Calendly can
// neither re-enable a disabled subscription nor change one's events, and keeps the signing key
// write-only: a disabled or incomplete one is deleted and created again with secret as its signing
// key (ConnectRecreated), a missing one created (ConnectCreated); both return Secret = secret, which
// the caller must store. An active, complete one is left alone (ConnectUnchanged, no Secret).
func (a *API) Connect(ctx context.Context, callback, secret string) (providers.ConnectResult, error) {
	subs, err := a.subscriptions(ctx)
	if err != nil {
		return providers.ConnectResult{}, err
	}
	var found *apiSubscription
	for i := range subs {
		if subs[i].CallbackURL != callback {
			continue
		}
		if subs[i].complete() {
			return providers.ConnectResult{Subscription: subs[i].subscription(), Action: providers.ConnectUnchanged}, nil
		}
		if found == nil {
			found = &subs[i]
		}
	}
	action := providers.ConnectCreated
	if found != nil {
		if err := a.deleteSubscription(ctx, found.URI); err != nil {
			return providers.ConnectResult{}, err
		}
		action = providers.ConnectRecreated
	}
	created, err := a.createSubscription(ctx, callback, secret)
	if err != nil {
		return providers.ConnectResult{}, err
	}
	return providers.ConnectResult{Subscription: created.subscription(), Action: action, Secret: secret}, nil
}

func (a *API) deleteSubscription(ctx context.Context, uri string) error {
	path, err := resourcePath("webhook_subscriptions", uri)
	if err != nil {
		return fmt.Errorf("%w: calendly: %v", providers.ErrAPIResponse, err)
	}
	_, err = a.http.Do(ctx, http.MethodDelete, path, nil, nil, nil)
	if err != nil && !errors.Is(err, providers.ErrAPINotFound) { // gone already is what we want
		return fmt.Errorf("calendly: delete webhook subscription: %w", err)
	}
	return nil
}

// createSubscription creates a subscription in the scope List reads.
func (a *API) createSubscription(ctx context.Context, callback, secret string) (apiSubscription, error) {
	o, err := a.whoami(ctx)
	if err != nil {
		return apiSubscription{}, err
	}
	req := struct {
		URL          string   `json:"url"`
		Events       []string `json:"events"`
		Organization string   `json:"organization"`
		Scope        string   `json:"scope"`
		User         string   `json:"user,omitempty"`
		SigningKey   string   `json:"signing_key,omitempty"`
	}{URL: callback, Events: WebhookEvents(), Organization: o.org, Scope: "organization", SigningKey: secret}
	if !a.orgWide(subscriptionsPath) {
		req.Scope, req.User = "user", o.me
	}
	var resp struct {
		Resource apiSubscription `json:"resource"`
	}
	if _, err := a.http.Do(ctx, http.MethodPost, subscriptionsPath, nil, req, &resp); err != nil {
		return apiSubscription{}, fmt.Errorf("calendly: create webhook subscription: %w", err)
	}
	return resp.Resource, nil
}
