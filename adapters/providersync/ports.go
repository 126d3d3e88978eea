package providersync

import (
	"context"

	"bookingledger/adapters/providers"
)

// Source reads one provider's bookings through its API. Sync reads the window page by page and calls
// page once per page, in the provider's order; an error from page stops it and is returned. Items carry
// the events the provider's webhooks would have carried, with the same event IDs, so that recording an
// item whose webhook already came appends nothing.
type Source interface {
	Name() string
	Sync(ctx context.Context, w providers.SyncWindow, page func(providers.SyncPage) error) error
}

// Subscriptions manages one provider's webhook subscriptions. Connect makes sure an active
// subscription for url exists with the events the provider's mapper handles: it creates a missing
// one, re-creates or re-enables a disabled one, and changes nothing when all is well (running it twice
// changes nothing). secret is a fresh signing secret it uses when the provider lets the client choose.
type Subscriptions interface {
	Name() string
	List(ctx context.Context) ([]providers.Subscription, error)
	Connect(ctx context.Context, url, secret string) (providers.ConnectResult, error)
}
