package providersync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"bookingledger/adapters/providers"
)

// addSecret keeps a subscription's signing secret, sealed under the newest master key.
func (s *Store) addSecret(ctx context.Context, box SecretBox, provider, subscriptionID, secret string) error {
	kek, sealed := box.SealSecret(provider, []byte(secret))
	if _, err := s.pool.Exec(ctx, `INSERT INTO provider_secrets (provider, subscription_id, kek_id, sealed) VALUES ($1, $2, $3, $4)`,
		provider, subscriptionID, kek, sealed); err != nil {
		return fmt.Errorf("keep the %s signing secret: %w", provider, err)
	}
	return nil
}

// maxStoredSecrets is how many of a provider's stored secrets verify: the newest ones. Older ones
// belong to subscriptions replaced since (a repair keeps the previous secret verifying while the
// provider's retries signed with it still arrive).
const maxStoredSecrets = 4

// secrets opens provider's stored secrets, newest first.
func (s *Store) secrets(ctx context.Context, box SecretBox, provider string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT kek_id, sealed FROM provider_secrets WHERE provider = $1 ORDER BY id DESC LIMIT $2`, provider, maxStoredSecrets)
	if err != nil {
		return nil, fmt.Errorf("stored %s secrets: %w", provider, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var (
			kek    string
			sealed []byte
		)
		if err := rows.Scan(&kek, &sealed); err != nil {
			return nil, fmt.Errorf("stored %s secrets: %w", provider, err)
		}
		plain, err := box.OpenSecret(kek, provider, sealed)
		if err != nil {
			return nil, fmt.Errorf("open a stored %s secret: %w", provider, err)
		}
		out = append(out, string(plain))
	}
	return out, rows.Err()
}

// StoredSecrets makes the secrets `providers connect` stored verify webhooks beside the configured
// ones, in every serve, without a restart: a verification that fails with the configured secrets is
// tried again with the stored ones, which are re-read from the database at most once per Refresh.
type StoredSecrets struct {
	Store  *Store
	Box    SecretBox
	Logger *slog.Logger
	// Refresh bounds how often a failing verification re-reads the stored secrets (DefaultRefresh when
	// zero), so that unsigned traffic cannot turn into a query per request.
	Refresh time.Duration
	Clock   func() time.Time
}

// DefaultRefresh is StoredSecrets' default re-read interval.
const DefaultRefresh = 2 * time.Second

// Wrap returns p verifying with stored secrets too. build makes the same provider with other secrets;
// configured is how many secrets p has (stored ones are labelled after them: "secret <n>").
func (ss *StoredSecrets) Wrap(p providers.Provider, configured int, build func(providers.Secrets) providers.Provider) providers.Provider {
	return &withStored{Provider: p, ss: ss, configured: configured, build: build}
}

type withStored struct {
	providers.Provider
	ss         *StoredSecrets
	configured int
	build      func(providers.Secrets) providers.Provider

	mu       sync.Mutex
	loadedAt time.Time
	alt      providers.Provider // nil: no stored secret
}

// Verify tries the configured secrets, then the stored ones.
func (w *withStored) Verify(h http.Header, body []byte, now time.Time) (providers.Verified, error) {
	v, err := w.Provider.Verify(h, body, now)
	if err == nil || !(errors.Is(err, providers.ErrBadSignature) || errors.Is(err, providers.ErrNoSecret)) {
		return v, err
	}
	alt := w.stored()
	if alt == nil {
		return v, err
	}
	v2, err2 := alt.Verify(h, body, now)
	if err2 != nil {
		if errors.Is(err, providers.ErrNoSecret) {
			return v2, err2
		}
		return v, err
	}
	v2.SecretIndex += w.configured
	return v2, nil
}

// stored returns the provider built over the stored secrets, re-read when older than Refresh.
func (w *withStored) stored() providers.Provider {
	w.mu.Lock()
	defer w.mu.Unlock()
	clock := w.ss.Clock
	if clock == nil {
		clock = time.Now
	}
	refresh := w.ss.Refresh
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	now := clock()
	if !w.loadedAt.IsZero() && now.Sub(w.loadedAt) < refresh {
		return w.alt
	}
	w.loadedAt = now
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	list, err := w.ss.Store.secrets(ctx, w.ss.Box, w.Provider.Name())
	if err != nil {
		if w.ss.Logger != nil {
			w.ss.Logger.Warn("stored provider secrets not read", "provider", w.Provider.Name(), "error", err.Error())
		}
		return w.alt // keep what verified before
	}
	if len(list) == 0 {
		w.alt = nil
		return nil
	}
	w.alt = w.build(providers.NewSecrets(list...))
	return w.alt
}
