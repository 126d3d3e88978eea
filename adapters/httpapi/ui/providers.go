package ui

import (
	"context"
	"net/http"
	"time"
)

// ProviderStatus is one provider on the Providers page: whether bookingledger reads its API, its
// webhook subscriptions as the watch last listed them, its last webhook and its last sync
// (adapters/providersync keeps them).
type ProviderStatus struct {
	Name       string
	API        bool
	WebhookURL string
	// Subscriptions and CheckedAt are the watch's last look; CheckError why it could not look.
	Subscriptions []ProviderSubscription
	CheckedAt     time.Time
	CheckError    string
	// Problems the watch found (a disabled subscription, none active).
	Unhealthy    int
	LastDelivery time.Time
	// The last sync run: when, whether it worked, what it found.
	LastSync                   time.Time
	SyncOK                     bool
	SyncError                  string
	Fetched, Recorded, Already int
	MissedTotal                int64
}

// ProviderSubscription is one webhook subscription at a provider.
type ProviderSubscription struct {
	ID, URL, State string
	Events         []string
}

func (s *server) providers(w http.ResponseWriter, r *http.Request) {
	list, err := s.ProviderStatus(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "providers", "Providers", list)
}

// providerStatusFunc is the dependency's type, for the wiring's compile-time check.
type providerStatusFunc = func(ctx context.Context) ([]ProviderStatus, error)
