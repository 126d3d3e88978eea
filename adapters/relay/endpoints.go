package relay

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bookingledger/adapters/providers/standard"
	"bookingledger/domain/ledger"
	prelay "bookingledger/projections/relay"
)

// Errors callers branch on.
var (
	ErrNotFound      = errors.New("not found")
	ErrInvalidTypes  = prelay.ErrInvalidTypes
	ErrInvalidFilter = prelay.ErrInvalidFilter
	ErrInvalid       = errors.New("invalid request")
)

// RotationOverlap is how long a rotated-out secret keeps signing alongside the new one, so receivers
// can switch at their own pace.
const RotationOverlap = 24 * time.Hour

// Endpoint is a user's receiver. Its secrets are not part of it: they are shown once, when created or
// rotated.
type Endpoint struct {
	ID    int64
	URL   string
	Types []string
	// Filter narrows the types' events (the zero Filter: none); a change applies to the events
	// recorded after it.
	Filter      Filter
	Description string
	// Disabled is set by disable or by a 410 answer; DisabledReason says which.
	Disabled       bool
	DisabledAt     time.Time
	DisabledReason string
	// PreviousUntil is when the secret before the last rotation stops signing (zero: none).
	PreviousUntil       time.Time
	ConsecutiveFailures int
	CreatedAt           time.Time
	// Settings are how the endpoint is sent to: order, throttle, breaker (breaker.go).
	Settings
}

// NewEndpoint is what Add needs.
type NewEndpoint struct {
	URL         string
	Types       []string
	Filter      Filter
	Description string
	// Options are the delivery settings; nil fields take their defaults.
	Options SettingsUpdate
}

// ParseTypes splits a comma-separated filter ("booking.scheduled.*, booking.payment_*") into
// patterns; empty means every type.
func ParseTypes(s string) ([]string, error) { return prelay.ParseTypes(s) }

// CheckTypes validates type patterns (projections/relay.CheckTypes).
func CheckTypes(patterns []string) error { return prelay.CheckTypes(patterns) }

// MatchTypes reports whether an event type passes the patterns (none: every type).
func MatchTypes(patterns []string, eventType string) bool {
	return prelay.MatchTypes(patterns, eventType)
}

// Filter narrows an endpoint's events by provider, resource and booking status after the event
// (docs/relay.md, "Filters").
type Filter = prelay.Filter

// ParseFilter reads the filter syntax ("provider=calcom|acuity,status=active,resource=room-a").
func ParseFilter(s string) (Filter, error) { return prelay.ParseFilter(s) }

// NewSecret returns a fresh Standard Webhooks secret: "whsec_" and the base64 of 24 random bytes.
func NewSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return standard.SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

const endpointColumns = `id, url, types, filter, description, disabled_at, disabled_reason, previous_until,
consecutive_failures, created_at, ` + deliveryColumnsOfEndpoint

func scanEndpoint(row pgx.Row) (Endpoint, error) {
	var (
		e                 Endpoint
		filter            string
		disabledAt, until *time.Time
	)
	if err := row.Scan(&e.ID, &e.URL, &e.Types, &filter, &e.Description, &disabledAt, &e.DisabledReason, &until,
		&e.ConsecutiveFailures, &e.CreatedAt, &e.Ordered, &e.RatePerSecond, &e.Concurrency, &e.BreakerFailures,
		&e.disableAfterMS, &e.failingSince, &e.probeAt, &e.AutoDisabled); err != nil {
		return Endpoint{}, err
	}
	f, err := prelay.ParseFilter(filter)
	if err != nil {
		return Endpoint{}, fmt.Errorf("stored filter %q: %w", filter, err)
	}
	e.Filter = f
	if disabledAt != nil {
		e.Disabled, e.DisabledAt = true, *disabledAt
	}
	if until != nil {
		e.PreviousUntil = *until
	}
	if e.Types == nil {
		e.Types = []string{}
	}
	e.Settings.fill()
	return e, nil
}

// AddEndpoint validates and stores an endpoint and returns it with its secret, which is not shown
// again. The URL must pass the guard.
func (r *Relay) AddEndpoint(ctx context.Context, n NewEndpoint) (Endpoint, string, error) {
	u, err := r.guard.CheckURL(ctx, n.URL)
	if err != nil {
		return Endpoint{}, "", err
	}
	if err := CheckTypes(n.Types); err != nil {
		return Endpoint{}, "", err
	}
	if err := n.Filter.Check(); err != nil {
		return Endpoint{}, "", err
	}
	if len(n.Description) > 500 || !ledger.Storable(n.Description) {
		return Endpoint{}, "", fmt.Errorf("%w: description must be UTF-8 without NUL, at most 500 bytes", ErrInvalid)
	}
	opts, err := n.Options.values()
	if err != nil {
		return Endpoint{}, "", err
	}
	types := n.Types
	if types == nil {
		types = []string{}
	}
	secret := NewSecret()
	var e Endpoint
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		var err error
		e, err = scanEndpoint(tx.QueryRow(ctx, `INSERT INTO relay_endpoints (url, types, filter, description, secret,
    ordered, rate_per_second, concurrency, breaker_failures, disable_after_ms)
VALUES ($1, $2, $3, $4, $5, coalesce($6::bool, false), coalesce($7::float8, 0), coalesce($8::int, 0), coalesce($9::int, 5),
    coalesce($10::bigint, 432000000)) RETURNING `+endpointColumns,
			append([]any{u.String(), types, n.Filter.String(), n.Description, secret}, opts...)...))
		if err != nil {
			return err
		}
		return addRule(ctx, tx, e.ID, "created_at")
	})
	if err != nil {
		return Endpoint{}, "", fmt.Errorf("add endpoint: %w", err)
	}
	return e, secret, nil
}

// EndpointUpdate changes an endpoint; a nil field keeps its value, and Types pointing at an empty
// list means every type.
type EndpointUpdate struct {
	URL         *string
	Types       *[]string
	Filter      *Filter
	Description *string
	// Options change the delivery settings given.
	Options SettingsUpdate
}

// addRule records an endpoint's types and filter as stored as its rule from since (a column of
// relay_endpoints or "now()"): the fan-out matches an event by the rule in force when it was recorded.
func addRule(ctx context.Context, tx pgx.Tx, id int64, since string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO relay_endpoint_rules (endpoint_id, since, types, filter)
SELECT id, `+since+`, types, filter FROM relay_endpoints WHERE id = $1
ON CONFLICT (endpoint_id, since) DO UPDATE SET types = excluded.types, filter = excluded.filter`, id); err != nil {
		return fmt.Errorf("record the endpoint's rule: %w", err)
	}
	return nil
}

// UpdateEndpoint changes an endpoint's URL, types, filter or description, each checked as AddEndpoint
// checks it. Deliveries not yet sent go to the new URL (each attempt reads it), so an endpoint that
// moved keeps its secret, its deliveries and their webhook-ids; new types and a new filter apply to
// the events recorded from now on (a replay covers the past). Its state, failure streak and secrets
// stay.
func (r *Relay) UpdateEndpoint(ctx context.Context, id int64, u EndpointUpdate) (Endpoint, error) {
	if u.URL == nil && u.Types == nil && u.Filter == nil && u.Description == nil && u.Options == (SettingsUpdate{}) {
		return Endpoint{}, fmt.Errorf("%w: nothing to change (give a url, types, a filter, a description or a delivery setting)", ErrInvalid)
	}
	opts, err := u.Options.values()
	if err != nil {
		return Endpoint{}, err
	}
	var url, types, filter, desc any // nil: keep
	if u.URL != nil {
		v, err := r.guard.CheckURL(ctx, *u.URL)
		if err != nil {
			return Endpoint{}, err
		}
		url = v.String()
	}
	if u.Types != nil {
		if err := CheckTypes(*u.Types); err != nil {
			return Endpoint{}, err
		}
		types = append([]string{}, *u.Types...) // never NULL: an empty list is every type
	}
	if u.Filter != nil {
		if err := u.Filter.Check(); err != nil {
			return Endpoint{}, err
		}
		filter = u.Filter.String()
	}
	if u.Description != nil {
		if len(*u.Description) > 500 || !ledger.Storable(*u.Description) {
			return Endpoint{}, fmt.Errorf("%w: description must be UTF-8 without NUL, at most 500 bytes", ErrInvalid)
		}
		desc = *u.Description
	}
	var e Endpoint
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		var err error
		e, err = scanEndpoint(tx.QueryRow(ctx, `UPDATE relay_endpoints
SET url = coalesce($2::text, url), types = coalesce($3::text[], types), description = coalesce($4::text, description),
    filter = coalesce($5::text, filter),
    ordered = coalesce($6::bool, ordered), rate_per_second = coalesce($7::float8, rate_per_second),
    concurrency = coalesce($8::int, concurrency), breaker_failures = coalesce($9::int, breaker_failures),
    disable_after_ms = coalesce($10::bigint, disable_after_ms)
WHERE id = $1 RETURNING `+endpointColumns, append([]any{id, url, types, desc, filter}, opts...)...))
		if err != nil {
			return err
		}
		if err := r.settingsChanged(ctx, tx, e); err != nil {
			return err
		}
		if types == nil && filter == nil {
			return nil
		}
		return addRule(ctx, tx, id, "now()")
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, fmt.Errorf("endpoint %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("update endpoint %d: %w", id, err)
	}
	return e, nil
}

// Endpoints lists every endpoint, oldest first.
func (r *Relay) Endpoints(ctx context.Context) ([]Endpoint, error) {
	rows, err := r.pool.Query(ctx, `SELECT `+endpointColumns+` FROM relay_endpoints ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list endpoints: %w", err)
	}
	defer rows.Close()
	var out []Endpoint
	for rows.Next() {
		e, err := scanEndpoint(rows)
		if err != nil {
			return nil, fmt.Errorf("list endpoints: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Endpoint returns one endpoint.
func (r *Relay) Endpoint(ctx context.Context, id int64) (Endpoint, error) {
	e, err := scanEndpoint(r.pool.QueryRow(ctx, `SELECT `+endpointColumns+` FROM relay_endpoints WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, fmt.Errorf("endpoint %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("endpoint %d: %w", id, err)
	}
	return e, nil
}

// DisableEndpoint stops sending to an endpoint: its pending deliveries pause when their turn comes,
// and new events are kept as paused deliveries until EnableEndpoint.
func (r *Relay) DisableEndpoint(ctx context.Context, id int64, reason string) (Endpoint, error) {
	var e Endpoint
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		var err error
		e, err = r.disable(ctx, tx, id, reason)
		return err
	})
	return e, err
}

// disable disables an endpoint in tx and, when it was enabled, raises endpoint.disabled.
func (r *Relay) disable(ctx context.Context, tx pgx.Tx, id int64, reason string) (Endpoint, error) {
	var was bool
	err := tx.QueryRow(ctx, `SELECT disabled_at IS NOT NULL FROM relay_endpoints WHERE id = $1 FOR UPDATE`, id).Scan(&was)
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, fmt.Errorf("endpoint %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("disable endpoint %d: %w", id, err)
	}
	e, err := scanEndpoint(tx.QueryRow(ctx, `UPDATE relay_endpoints
SET disabled_at = coalesce(disabled_at, now()), disabled_reason = $2 WHERE id = $1 RETURNING `+endpointColumns, id, reason))
	if err != nil {
		return Endpoint{}, fmt.Errorf("disable endpoint %d: %w", id, err)
	}
	if !was {
		if err := r.RaiseEndpointDisabled(ctx, tx, id, reason); err != nil {
			return Endpoint{}, fmt.Errorf("disable endpoint %d: %w", id, err)
		}
	}
	return e, nil
}

// EnableEndpoint resumes an endpoint: every paused delivery is scheduled again (a fresh run of the
// retry schedule) and its failure streak starts over — except those of an endpoint the relay disabled
// after a sustained failure, which stay paused until EnableAndSendMissed. It returns the endpoint and
// how many deliveries resumed.
func (r *Relay) EnableEndpoint(ctx context.Context, id int64) (Endpoint, int, error) {
	return r.enable(ctx, id, false)
}

// RotateSecret gives an endpoint a new secret and returns it (shown once); the current one keeps
// signing alongside it for RotationOverlap. A secret rotated out earlier is dropped.
func (r *Relay) RotateSecret(ctx context.Context, id int64) (Endpoint, string, error) {
	secret := NewSecret()
	e, err := scanEndpoint(r.pool.QueryRow(ctx, `UPDATE relay_endpoints
SET previous_secret = secret, previous_until = now() + $3::interval, secret = $2
WHERE id = $1 RETURNING `+endpointColumns, id, secret, RotationOverlap.String()))
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, "", fmt.Errorf("endpoint %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Endpoint{}, "", fmt.Errorf("rotate secret of endpoint %d: %w", id, err)
	}
	return e, secret, nil
}

// RemoveEndpoint deletes an endpoint with its deliveries, attempts and alerts; jobs still queued for
// them find nothing and end.
func (r *Relay) RemoveEndpoint(ctx context.Context, id int64) error {
	tag, err := r.pool.Exec(ctx, `DELETE FROM relay_endpoints WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("remove endpoint %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("endpoint %d: %w", id, ErrNotFound)
	}
	return nil
}

// activeSecrets returns the secrets an endpoint signs with at now, newest first.
func activeSecrets(secret string, previous *string, until *time.Time, now time.Time) []string {
	out := []string{secret}
	if previous != nil && until != nil && now.Before(*until) {
		out = append(out, *previous)
	}
	return out
}

func collectIDs(rows pgx.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}
