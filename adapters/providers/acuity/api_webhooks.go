package acuity

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"bookingledger/adapters/providers"
)

// dynamicWebhook is one entry of GET /webhooks.
type dynamicWebhook struct {
	ID     int64  `json:"id"`
	Event  string `json:"event"`
	Target string `json:"target"`
	Status string `json:"status"`
}

func (h dynamicWebhook) subscription() providers.Subscription {
	s := providers.Subscription{ID: strconv.FormatInt(h.ID, 10), URL: h.Target, Events: []string{h.Event}, State: providers.SubscriptionActive}
	if h.Status != "" && h.Status != "active" {
		s.State, s.Detail = providers.SubscriptionDisabled, "status "+h.Status
	}
	return s
}

// List returns the account's dynamic webhooks, one subscription per event. Acuity lists only active
// ones: a webhook it stopped is not there at all. Webhooks set up in Acuity's settings are not listed.
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

func (a *API) webhooks(ctx context.Context) ([]dynamicWebhook, error) {
	var hooks []dynamicWebhook
	if _, err := a.api.Do(ctx, http.MethodGet, "/webhooks", nil, nil, &hooks); err != nil {
		return nil, fmt.Errorf("acuity webhooks: %w", err)
	}
	return hooks, nil
}

// Connect makes sure target has an active dynamic webhook for each of SubscriptionEvents, creating
// the missing ones (Acuity has one webhook per event, and allows 25 an account). Acuity signs with
// the API key, so there is no secret to choose or return. The result names the target's webhooks
// for those events (ids joined by commas); a Connect cut short leaves the webhooks it created, and
// the next one creates only the rest.
func (a *API) Connect(ctx context.Context, target, _ string) (providers.ConnectResult, error) {
	hooks, err := a.webhooks(ctx)
	if err != nil {
		return providers.ConnectResult{}, err
	}
	var ids, have []string
	for _, h := range hooks {
		if h.Target == target && slices.Contains(SubscriptionEvents(), h.Event) && !slices.Contains(have, h.Event) {
			ids, have = append(ids, strconv.FormatInt(h.ID, 10)), append(have, h.Event)
		}
	}
	action := providers.ConnectUnchanged
	created := providers.ConnectCreated
	if len(have) > 0 {
		created = providers.ConnectUpdated // some of our events were there: the rest is added
	}
	for _, ev := range SubscriptionEvents() {
		if slices.Contains(have, ev) {
			continue
		}
		var h dynamicWebhook
		if _, err := a.api.Do(ctx, http.MethodPost, "/webhooks", nil, map[string]string{"event": ev, "target": target}, &h); err != nil {
			return providers.ConnectResult{}, fmt.Errorf("acuity connect: create %s webhook: %w", ev, err)
		}
		ids, have = append(ids, strconv.FormatInt(h.ID, 10)), append(have, ev)
		action = created
	}
	sub := providers.Subscription{ID: strings.Join(ids, ","), URL: target, Events: have, State: providers.SubscriptionActive}
	return providers.ConnectResult{Subscription: sub, Action: action}, nil
}
