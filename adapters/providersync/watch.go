package providersync

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"bookingledger/adapters/providers"
)

// SecretBox seals and opens the signing secrets Connect creates: privacy.Keyring.
type SecretBox interface {
	SealSecret(label string, secret []byte) (kekID string, sealed []byte)
	OpenSecret(kekID, label string, sealed []byte) ([]byte, error)
}

// WatchConfig configures a Watcher.
type WatchConfig struct {
	Store         *Store
	Subscriptions []Subscriptions
	// Box seals the secrets of subscriptions Connect creates; required to connect (a created
	// subscription's secret must be kept, and never in plain text).
	Box    SecretBox
	Alerts Alerter
	// Repair lets Check re-create or re-enable a disabled or missing subscription, as Connect would,
	// when the provider's webhook URL is known (BOOKINGLEDGER_PROVIDERS_REPAIR).
	Repair bool
	Clock  func() time.Time
	Logger *slog.Logger
}

// Watcher checks and connects providers' webhook subscriptions.
type Watcher struct {
	cfg  WatchConfig
	subs map[string]Subscriptions
}

// NewWatcher returns a watcher over cfg's providers.
func NewWatcher(cfg WatchConfig) *Watcher {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{cfg: cfg, subs: map[string]Subscriptions{}}
	for _, s := range cfg.Subscriptions {
		w.subs[s.Name()] = s
	}
	return w
}

// Has reports whether provider's subscriptions can be managed (an API credential is configured).
func (w *Watcher) Has(provider string) bool { _, ok := w.subs[provider]; return ok }

// ErrNoSecretBox: Connect needs the master key to keep the secret of a subscription it creates.
var ErrNoSecretBox = fmt.Errorf("connecting needs the master key (BOOKINGLEDGER_MASTER_KEY) to keep the new subscription's signing secret")

// Connect makes sure provider has an active subscription for url with the events bookingledger
// maps, records url as the provider's webhook URL, keeps the secret of a subscription it creates
// (sealed: serve verifies with it at once, no restart, no copied variable), and checks the
// subscriptions again. Running it twice changes nothing the second time.
func (w *Watcher) Connect(ctx context.Context, provider, url string) (providers.ConnectResult, error) {
	subs, ok := w.subs[provider]
	if !ok {
		return providers.ConnectResult{}, fmt.Errorf("connect %s: %w", provider, ErrUnknownProvider)
	}
	if w.cfg.Box == nil {
		return providers.ConnectResult{}, ErrNoSecretBox
	}
	res, err := subs.Connect(ctx, url, providers.NewSigningSecret())
	if err != nil {
		return res, fmt.Errorf("connect %s: %w", provider, err)
	}
	if res.Secret != "" {
		if err := w.cfg.Store.addSecret(ctx, w.cfg.Box, provider, res.Subscription.ID, res.Secret); err != nil {
			return res, err
		}
	}
	if err := w.cfg.Store.SetWebhookURL(ctx, provider, url); err != nil {
		return res, err
	}
	_, err = w.Check(ctx, provider)
	return res, err
}

// Check is one look at a provider's subscriptions.
type Check struct {
	Provider      string                   `json:"provider"`
	WebhookURL    string                   `json:"webhook_url,omitempty"`
	Subscriptions []providers.Subscription `json:"subscriptions"`
	// Problems says what is wrong, one sentence each; Unhealthy counts them.
	Problems  []string                 `json:"problems"`
	Unhealthy int                      `json:"unhealthy"`
	Repaired  *providers.ConnectResult `json:"repaired,omitempty"`
	After     []providers.Subscription `json:"subscriptions_after_repair,omitempty"`
}

// Check lists provider's subscriptions, records them, and judges the one for the provider's webhook
// URL (or, before any connect, every subscription whose URL ends in /webhooks/<provider>, and then
// only a disabled one is a problem): a disabled one, or none active, opens the provider's subscription item, raises an alert once, and —
// with Repair and a known URL — is repaired as Connect would. A healthy check closes the item.
func (w *Watcher) Check(ctx context.Context, provider string) (Check, error) {
	subs, ok := w.subs[provider]
	if !ok {
		return Check{Provider: provider}, fmt.Errorf("check %s: %w", provider, ErrUnknownProvider)
	}
	st, err := w.cfg.Store.State(ctx, provider)
	if err != nil {
		return Check{Provider: provider}, err
	}
	c := Check{Provider: provider, WebhookURL: st.WebhookURL, Problems: []string{}}
	if err := w.cfg.Store.refreshLastDelivery(ctx, provider); err != nil {
		w.cfg.Logger.Warn("provider watch: last delivery not read", "provider", provider, "error", err.Error())
	}
	list, err := subs.List(ctx)
	now := w.cfg.Clock().UTC()
	if err != nil {
		if serr := w.cfg.Store.saveSubscriptions(ctx, provider, nil, 0, now, err); serr != nil {
			return c, serr
		}
		return c, w.problem(ctx, provider, fmt.Sprintf("the %s subscriptions could not be checked: %v — check the API credential", provider, err), nil)
	}
	c.Subscriptions = list
	c.Problems = judge(provider, st.WebhookURL, list)
	c.Unhealthy = len(c.Problems)
	if err := w.cfg.Store.saveSubscriptions(ctx, provider, list, c.Unhealthy, now, nil); err != nil {
		return c, err
	}
	if c.Unhealthy == 0 {
		return c, w.cfg.Store.closeItem(ctx, provider, "subscription", "the subscription is active again")
	}
	if err := w.problem(ctx, provider, strings.Join(c.Problems, "; ")+w.advice(st.WebhookURL), list); err != nil {
		return c, err
	}
	if !w.cfg.Repair || st.WebhookURL == "" || w.cfg.Box == nil {
		return c, nil
	}
	res, err := w.Connect(ctx, provider, st.WebhookURL)
	if err != nil {
		return c, fmt.Errorf("repair %s subscription: %w", provider, err)
	}
	c.Repaired = &res
	c.After, err = w.cfg.Store.Subscriptions(ctx, provider)
	w.cfg.Logger.Info("provider watch: subscription repaired", "provider", provider, "action", res.Action, "subscription", res.Subscription.ID)
	return c, err
}

func (w *Watcher) advice(url string) string {
	switch {
	case url == "":
		return " — run `bookingledger providers connect <provider> --url <public webhook URL>`, then `bookingledger sync` over the gap"
	case w.cfg.Repair:
		return " — repairing it; then `bookingledger sync` over the gap"
	}
	return " — run `bookingledger providers connect` again (or set BOOKINGLEDGER_PROVIDERS_REPAIR=true), then `bookingledger sync` over the gap"
}

// problem opens (or updates) the provider's subscription item and alerts when it is new.
func (w *Watcher) problem(ctx context.Context, provider, reason string, list []providers.Subscription) error {
	opened, err := w.cfg.Store.openItemNew(ctx, provider, "subscription", reason)
	if err != nil {
		return err
	}
	w.cfg.Logger.Warn("provider watch: subscription unhealthy", "provider", provider, "reason", reason)
	if !opened || w.cfg.Alerts == nil {
		return nil
	}
	return w.cfg.Alerts.Raise(ctx, provider, AlertSubscriptionDisabled, "bookingledger: "+reason,
		map[string]any{"provider": provider, "subscriptions": list})
}

// judge says what is wrong with the subscriptions for url (every one ending in /webhooks/<provider>
// when url is not known yet).
func judge(provider, url string, list []providers.Subscription) []string {
	ours := func(s providers.Subscription) bool {
		if url != "" {
			return s.URL == url
		}
		return strings.HasSuffix(strings.TrimRight(s.URL, "/"), "/webhooks/"+provider)
	}
	target := url
	if target == "" {
		target = "…/webhooks/" + provider
	}
	var problems []string
	active := false
	for _, s := range list {
		if !ours(s) {
			continue
		}
		if s.State == providers.SubscriptionActive {
			active = true
			continue
		}
		problems = append(problems, fmt.Sprintf("%s subscription %s for %s is %s", provider, s.ID, s.URL, s.State))
	}
	// Before any connect the webhook URL is not known: a subscription may deliver through a proxy
	// path, so only one that Calendly & co. disabled is a problem, not the absence of one.
	if !active && url != "" {
		problems = append(problems, fmt.Sprintf("no active %s subscription for %s", provider, target))
	}
	return problems
}
