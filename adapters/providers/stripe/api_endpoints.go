package stripe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"bookingledger/adapters/providers"
)

// webhookEndpoint is the part of Stripe's webhook_endpoint object Connect reads. Secret is present
// only in the answer that created the endpoint.
type webhookEndpoint struct {
	ID            string   `json:"id"`
	URL           string   `json:"url"`
	EnabledEvents []string `json:"enabled_events"`
	Status        string   `json:"status"`
	Secret        string   `json:"secret"`
}

func (e webhookEndpoint) subscription() providers.Subscription {
	s := providers.Subscription{ID: e.ID, URL: e.URL, Events: e.EnabledEvents, State: providers.SubscriptionActive}
	if e.Status != "enabled" {
		s.State, s.Detail = providers.SubscriptionDisabled, "status "+e.Status
	}
	return s
}

// missing lists the mapped types e does not send ("*" sends every type).
func (e webhookEndpoint) missing() []string {
	if slices.Contains(e.EnabledEvents, "*") {
		return nil
	}
	var out []string
	for _, t := range Types() {
		if !slices.Contains(e.EnabledEvents, t) {
			out = append(out, t)
		}
	}
	return out
}

// List returns every webhook endpoint of the account, paging 100 at a time.
func (a *API) List(ctx context.Context) ([]providers.Subscription, error) {
	eps, err := a.endpoints(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]providers.Subscription, len(eps))
	for i, e := range eps {
		out[i] = e.subscription()
	}
	return out, nil
}

func (a *API) endpoints(ctx context.Context) ([]webhookEndpoint, error) {
	q := url.Values{"limit": {pageLimit}}
	var all []webhookEndpoint
	for {
		var list struct {
			HasMore bool              `json:"has_more"`
			Data    []webhookEndpoint `json:"data"`
		}
		if _, err := a.api.Do(ctx, http.MethodGet, "/v1/webhook_endpoints", q, nil, &list); err != nil {
			return nil, fmt.Errorf("stripe webhook endpoints: %w", err)
		}
		all = append(all, list.Data...)
		if !list.HasMore || len(list.Data) == 0 {
			return all, nil
		}
		q.Set("starting_after", list.Data[len(list.Data)-1].ID)
	}
}

// Connect makes sure an enabled endpoint for target sends every mapped type. Stripe chooses the
// signing secret itself (secret is not used): a created endpoint's is returned once, in
// ConnectResult.Secret. Of several endpoints for target, an enabled one is preferred. A disabled one
// is enabled in place (Stripe keeps its secret), an enabled one missing types gets them added to
// the ones it has; none is created with an Idempotency-Key, so a retried POST creates one endpoint.
func (a *API) Connect(ctx context.Context, target, _ string) (providers.ConnectResult, error) {
	eps, err := a.endpoints(ctx)
	if err != nil {
		return providers.ConnectResult{}, err
	}
	var found *webhookEndpoint
	for i := range eps {
		if eps[i].URL == target && (found == nil || found.Status != "enabled") {
			found = &eps[i]
		}
	}
	if found == nil {
		return a.create(ctx, target)
	}
	form := url.Values{}
	action := providers.ConnectUnchanged
	if missing := found.missing(); len(missing) > 0 {
		form["enabled_events[]"] = append(slices.Clone(found.EnabledEvents), missing...)
		action = providers.ConnectUpdated
	}
	if found.Status != "enabled" {
		form.Set("disabled", "false")
		action = providers.ConnectEnabled
	}
	if action == providers.ConnectUnchanged {
		return providers.ConnectResult{Subscription: found.subscription(), Action: action}, nil
	}
	var updated webhookEndpoint
	if _, err := a.api.DoForm(ctx, http.MethodPost, "/v1/webhook_endpoints/"+url.PathEscape(found.ID), nil, nil, form, &updated); err != nil {
		return providers.ConnectResult{}, fmt.Errorf("stripe connect %s: %w", found.ID, err)
	}
	return providers.ConnectResult{Subscription: updated.subscription(), Action: action}, nil
}

func (a *API) create(ctx context.Context, target string) (providers.ConnectResult, error) {
	form := url.Values{"url": {target}, "enabled_events[]": Types()}
	// One key per Connect: the API's retries of this POST replay Stripe's first answer, while a
	// later Connect (after the endpoint was deleted) creates anew.
	key := make([]byte, 16)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)
	h := http.Header{"Idempotency-Key": {"bookingledger-connect-" + hex.EncodeToString(key)}}
	var created webhookEndpoint
	if _, err := a.api.DoForm(ctx, http.MethodPost, "/v1/webhook_endpoints", nil, h, form, &created); err != nil {
		return providers.ConnectResult{}, fmt.Errorf("stripe connect: create endpoint: %w", err)
	}
	if created.Secret == "" {
		return providers.ConnectResult{}, fmt.Errorf("%w: stripe connect: the created endpoint %s came without its secret", providers.ErrAPIResponse, created.ID)
	}
	return providers.ConnectResult{Subscription: created.subscription(), Action: providers.ConnectCreated, Secret: created.Secret}, nil
}
