package calcom

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"bookingledger/adapters/providers"
)

// MappedTriggers are the triggers a webhook at Cal.com needs for the ledger: the ones Map turns into
// events. Connect subscribes them.
func MappedTriggers() []string {
	return []string{
		TriggerBookingCreated, TriggerBookingRescheduled, TriggerBookingCancelled, TriggerBookingRequested,
		TriggerBookingRejected, TriggerNoShowUpdated, TriggerMeetingStarted, TriggerMeetingEnded,
	}
}

// apiWebhook is a webhook of /webhooks. The secret, when Cal.com echoes it, is never decoded.
type apiWebhook struct {
	ID            string   `json:"id"`
	SubscriberURL string   `json:"subscriberUrl"`
	Triggers      []string `json:"triggers"`
	Active        bool     `json:"active"`
}

func (w apiWebhook) subscription() providers.Subscription {
	s := providers.Subscription{ID: w.ID, URL: w.SubscriberURL, Events: slices.Clone(w.Triggers), State: providers.SubscriptionActive}
	if !w.Active {
		s.State, s.Detail = providers.SubscriptionDisabled, "active: false"
	}
	return s
}

// List returns the user's webhooks (GET /webhooks, every page).
func (a *API) List(ctx context.Context) ([]providers.Subscription, error) {
	hooks, err := a.webhooks(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]providers.Subscription, len(hooks))
	for i, h := range hooks {
		out[i] = h.subscription()
	}
	return out, nil
}

func (a *API) webhooks(ctx context.Context) ([]apiWebhook, error) {
	var all []apiWebhook
	for skip := 0; ; {
		var p struct {
			Data []apiWebhook `json:"data"`
		}
		q := url.Values{"take": {strconv.Itoa(a.pageSize)}, "skip": {strconv.Itoa(skip)}}
		if _, err := a.api.Do(ctx, http.MethodGet, "/webhooks", q, nil, &p); err != nil {
			return nil, fmt.Errorf("calcom webhooks: %w", err)
		}
		all = append(all, p.Data...)
		skip += len(p.Data)
		if len(p.Data) < a.pageSize {
			return all, nil
		}
	}
}

// Connect makes sure an active webhook posts the mapped triggers to url. Cal.com lets a webhook be
// re-enabled and changed in place, so a disabled one is enabled (PATCH active) and one missing
// triggers gets them added (PATCH triggers); secret is used only when none exists (POST), and is then
// the result's Secret. An existing webhook keeps the secret it has.
func (a *API) Connect(ctx context.Context, target, secret string) (providers.ConnectResult, error) {
	hooks, err := a.webhooks(ctx)
	if err != nil {
		return providers.ConnectResult{}, err
	}
	for _, h := range hooks {
		if h.SubscriberURL != target {
			continue
		}
		return a.repair(ctx, h)
	}
	in := map[string]any{"subscriberUrl": target, "triggers": MappedTriggers(), "active": true, "secret": secret}
	var out struct {
		Data apiWebhook `json:"data"`
	}
	if _, err := a.api.Do(ctx, http.MethodPost, "/webhooks", nil, in, &out); err != nil {
		return providers.ConnectResult{}, fmt.Errorf("calcom connect: create webhook: %w", err)
	}
	return providers.ConnectResult{Subscription: out.Data.subscription(), Action: providers.ConnectCreated, Secret: secret}, nil
}

// repair enables h and adds the triggers it lacks, in one PATCH.
func (a *API) repair(ctx context.Context, h apiWebhook) (providers.ConnectResult, error) {
	patch := map[string]any{}
	action := providers.ConnectUnchanged
	if missing := missingTriggers(h.Triggers); len(missing) > 0 {
		patch["triggers"] = append(slices.Clone(h.Triggers), missing...)
		action = providers.ConnectUpdated
	}
	if !h.Active {
		patch["active"] = true
		action = providers.ConnectEnabled
	}
	if len(patch) == 0 {
		return providers.ConnectResult{Subscription: h.subscription(), Action: action}, nil
	}
	var out struct {
		Data apiWebhook `json:"data"`
	}
	if _, err := a.api.Do(ctx, http.MethodPatch, "/webhooks/"+url.PathEscape(h.ID), nil, patch, &out); err != nil {
		return providers.ConnectResult{}, fmt.Errorf("calcom connect: update webhook %s: %w", providers.Clip(h.ID), err)
	}
	return providers.ConnectResult{Subscription: out.Data.subscription(), Action: action}, nil
}

func missingTriggers(have []string) []string {
	var missing []string
	for _, t := range MappedTriggers() {
		if !slices.Contains(have, t) {
			missing = append(missing, t)
		}
	}
	return missing
}
