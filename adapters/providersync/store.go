package providersync

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/providers"
	"bookingledger/projections/calendar"
)

// State is what the database keeps of one provider's sync and subscriptions (provider_sync_state).
type State struct {
	Provider   string     `json:"provider"`
	WebhookURL string     `json:"webhook_url,omitempty"`
	Cursor     string     `json:"cursor,omitempty"`
	LastRunAt  *time.Time `json:"last_run_at,omitempty"`
	LastOKAt   *time.Time `json:"last_ok_at,omitempty"`
	LastError  string     `json:"last_error,omitempty"`
	LastFrom   *time.Time `json:"last_from,omitempty"`
	LastTo     *time.Time `json:"last_to,omitempty"`
	// What the last run found: objects read, objects that brought events the ledger lacked, objects
	// whose events were all there already.
	LastFetched  int   `json:"last_fetched"`
	LastRecorded int   `json:"last_recorded"`
	LastAlready  int   `json:"last_already"`
	MissedTotal  int64 `json:"missed_total"`
	// The subscription watch's last check.
	CheckedAt   *time.Time `json:"subscriptions_checked_at,omitempty"`
	CheckError  string     `json:"subscriptions_error,omitempty"`
	Unhealthy   int        `json:"subscriptions_unhealthy"`
	LastDeliver *time.Time `json:"last_delivery_at,omitempty"`
}

// Store holds the provider sync's tables: provider_sync_state, provider_subscriptions,
// provider_secrets and provider_alerts, and opens and closes the sync's reconciliation items. What
// it reads or writes of other owners' tables goes through them: the receipts (a provider's last
// webhook delivery) through adapters/postgres, the reconciliation items through
// adapters/postgres/readmodel.
type Store struct {
	pool     *pgxpool.Pool
	receipts *postgres.Store
	items    *readmodel.Items
}

// NewStore returns the store over pool.
func NewStore(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, receipts: postgres.NewStore(pool), items: readmodel.NewItems(pool)}
}

const stateColumns = `provider, webhook_url, cursor, last_run_at, last_ok_at, last_error, last_from, last_to,
last_fetched, last_recorded, last_already, missed_total, subscriptions_checked_at, subscriptions_error,
subscriptions_unhealthy, last_delivery_at`

func scanState(row pgx.Row) (State, error) {
	var s State
	err := row.Scan(&s.Provider, &s.WebhookURL, &s.Cursor, &s.LastRunAt, &s.LastOKAt, &s.LastError, &s.LastFrom, &s.LastTo,
		&s.LastFetched, &s.LastRecorded, &s.LastAlready, &s.MissedTotal, &s.CheckedAt, &s.CheckError, &s.Unhealthy, &s.LastDeliver)
	return s, err
}

// State returns provider's state; a provider never synced or checked has a zero State with its name.
func (s *Store) State(ctx context.Context, provider string) (State, error) {
	st, err := scanState(s.pool.QueryRow(ctx, `SELECT `+stateColumns+` FROM provider_sync_state WHERE provider = $1`, provider))
	if errors.Is(err, pgx.ErrNoRows) {
		return State{Provider: provider}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("sync state of %s: %w", provider, err)
	}
	return st, nil
}

// States returns every provider's state that has one, by name.
func (s *Store) States(ctx context.Context) (map[string]State, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+stateColumns+` FROM provider_sync_state ORDER BY provider`)
	if err != nil {
		return nil, fmt.Errorf("sync states: %w", err)
	}
	defer rows.Close()
	out := map[string]State{}
	for rows.Next() {
		st, err := scanState(rows)
		if err != nil {
			return nil, fmt.Errorf("sync states: %w", err)
		}
		out[st.Provider] = st
	}
	return out, rows.Err()
}

// ensureState creates provider's row when it has none.
const ensureStateSQL = `INSERT INTO provider_sync_state (provider) VALUES ($1) ON CONFLICT (provider) DO NOTHING`

// SetWebhookURL records the public webhook URL `providers connect` made the subscription for.
func (s *Store) SetWebhookURL(ctx context.Context, provider, url string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO provider_sync_state (provider, webhook_url) VALUES ($1, $2)
ON CONFLICT (provider) DO UPDATE SET webhook_url = excluded.webhook_url`, provider, url)
	if err != nil {
		return fmt.Errorf("save webhook url of %s: %w", provider, err)
	}
	return nil
}

// saveRun records a finished periodic or manual (not dry) run: its counts, its cursor when it
// moved, and its error ("" on success). missed adds to the provider's count of events only the sync
// found.
func (s *Store) saveRun(ctx context.Context, r Result, runErr error, missed int) error {
	errText := ""
	if runErr != nil {
		errText = clip(runErr.Error())
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO provider_sync_state (provider) VALUES ($1) ON CONFLICT (provider) DO NOTHING;`, r.Provider)
	if err != nil {
		return fmt.Errorf("save sync run of %s: %w", r.Provider, err)
	}
	_, err = s.pool.Exec(ctx, `UPDATE provider_sync_state SET
last_run_at = $2, last_ok_at = CASE WHEN $3 = '' THEN $2 ELSE last_ok_at END, last_error = $3,
last_from = $4, last_to = $5, last_fetched = $6, last_recorded = $7, last_already = $8,
missed_total = missed_total + $9, cursor = CASE WHEN $10 THEN $11 ELSE cursor END
WHERE provider = $1`,
		r.Provider, r.At, errText, r.From, r.To, r.Fetched, r.Recorded, r.Already, missed, r.CursorMoved, r.Cursor)
	if err != nil {
		return fmt.Errorf("save sync run of %s: %w", r.Provider, err)
	}
	return nil
}

// saveSubscriptions replaces provider's listed subscriptions with subs and records the check.
func (s *Store) saveSubscriptions(ctx context.Context, provider string, subs []providers.Subscription, unhealthy int, at time.Time, checkErr error) error {
	errText := ""
	if checkErr != nil {
		errText = clip(checkErr.Error())
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, ensureStateSQL, provider); err != nil {
			return err
		}
		if checkErr == nil {
			if _, err := tx.Exec(ctx, `DELETE FROM provider_subscriptions WHERE provider = $1`, provider); err != nil {
				return err
			}
			for _, sub := range subs {
				if sub.Events == nil {
					sub.Events = []string{} // a provider that lists none: an empty array, not NULL
				}
				if _, err := tx.Exec(ctx, `INSERT INTO provider_subscriptions (provider, id, url, events, state, detail, checked_at)
VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (provider, id) DO NOTHING`,
					provider, sub.ID, sub.URL, sub.Events, sub.State, clip(sub.Detail), at); err != nil {
					return err
				}
			}
		}
		_, err := tx.Exec(ctx, `UPDATE provider_sync_state SET subscriptions_checked_at = $2, subscriptions_error = $3,
subscriptions_unhealthy = CASE WHEN $3 = '' THEN $4 ELSE subscriptions_unhealthy END WHERE provider = $1`,
			provider, at, errText, unhealthy)
		return err
	})
}

// Subscriptions returns what the last check listed for provider.
func (s *Store) Subscriptions(ctx context.Context, provider string) ([]providers.Subscription, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, url, events, state, detail FROM provider_subscriptions WHERE provider = $1 ORDER BY id`, provider)
	if err != nil {
		return nil, fmt.Errorf("subscriptions of %s: %w", provider, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (providers.Subscription, error) {
		var sub providers.Subscription
		err := r.Scan(&sub.ID, &sub.URL, &sub.Events, &sub.State, &sub.Detail)
		return sub, err
	})
}

// LastDelivery returns when provider's newest verified webhook delivery arrived: read among the
// newest receipts, else as the watch recorded it; nil when none is known.
func (s *Store) LastDelivery(ctx context.Context, provider string) (*time.Time, error) {
	at, ok, err := s.receipts.LastWebhookDelivery(ctx, provider)
	if err != nil {
		return nil, err
	}
	if ok {
		return &at, nil
	}
	st, err := s.State(ctx, provider)
	return st.LastDeliver, err
}

// refreshLastDelivery records when provider's newest verified webhook delivery (not a sync's receipt)
// arrived, when one is among the newest receipts; an older one stays as recorded.
func (s *Store) refreshLastDelivery(ctx context.Context, provider string) error {
	at, ok, err := s.receipts.LastWebhookDelivery(ctx, provider)
	if err != nil || !ok {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO provider_sync_state (provider, last_delivery_at) VALUES ($1, $2)
ON CONFLICT (provider) DO UPDATE SET last_delivery_at = greatest(provider_sync_state.last_delivery_at, excluded.last_delivery_at)`,
		provider, at)
	if err != nil {
		return fmt.Errorf("last delivery of %s: %w", provider, err)
	}
	return nil
}

// Item subjects of the sync's reconciliation items, one open item of each per provider.
func itemSubject(provider, what string) string { return provider + " " + what }

// openItemNew opens the provider's item of what (sync or subscription) with reason, or updates the
// reason of the one open; opened reports whether the item is new (an alert is raised once per item).
func (s *Store) openItemNew(ctx context.Context, provider, what, reason string) (opened bool, err error) {
	opened, err = s.items.Raise(ctx, calendar.ItemSync, itemSubject(provider, what), clip(reason))
	if err != nil {
		return false, fmt.Errorf("open %s item of %s: %w", what, provider, err)
	}
	return opened, nil
}

// closeItem closes the provider's open item of what, automatically, with note.
func (s *Store) closeItem(ctx context.Context, provider, what, note string) error {
	if err := s.items.CloseAuto(ctx, calendar.ItemSync, itemSubject(provider, what), clip(note)); err != nil {
		return fmt.Errorf("close %s item of %s: %w", what, provider, err)
	}
	return nil
}

// clip bounds a stored text.
func clip(s string) string {
	const limit = 500
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
