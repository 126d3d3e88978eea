package relaystore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	prelay "bookingledger/projections/relay"
)

const endpointColumns = `id, url, types, filter, description, disabled_at, disabled_reason, previous_until,
consecutive_failures, created_at, ordered, rate_per_second, concurrency, breaker_failures, disable_after_ms,
failing_since, probe_at, auto_disabled`

func scanEndpoint(row pgx.Row) (Endpoint, error) {
	var (
		e                                        Endpoint
		filter                                   string
		disabledAt, until, failingSince, probeAt *time.Time
		disableAfterMS                           int64
	)
	if err := row.Scan(&e.ID, &e.URL, &e.Types, &filter, &e.Description, &disabledAt, &e.DisabledReason, &until,
		&e.ConsecutiveFailures, &e.CreatedAt, &e.Ordered, &e.RatePerSecond, &e.Concurrency, &e.BreakerFailures,
		&disableAfterMS, &failingSince, &probeAt, &e.AutoDisabled); err != nil {
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
	e.DisableAfter = time.Duration(disableAfterMS) * time.Millisecond
	if failingSince != nil {
		e.FailingSince = *failingSince
	}
	if probeAt != nil {
		e.ProbeAt = *probeAt
	}
	return e, nil
}

// InsertEndpoint stores a checked endpoint (NewEndpoint.Check) with its secret, its settings (nil
// ones take their defaults) and its first rule.
func (s *Store) InsertEndpoint(ctx context.Context, n NewEndpoint, secret string) (Endpoint, error) {
	opts, err := n.Options.Args()
	if err != nil {
		return Endpoint{}, err
	}
	types := n.Types
	if types == nil {
		types = []string{}
	}
	var e Endpoint
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		e, err = scanEndpoint(tx.QueryRow(ctx, `INSERT INTO relay_endpoints (url, types, filter, description, secret,
    ordered, rate_per_second, concurrency, breaker_failures, disable_after_ms)
VALUES ($1, $2, $3, $4, $5, coalesce($6::bool, false), coalesce($7::float8, 0), coalesce($8::int, 0), coalesce($9::int, 5),
    coalesce($10::bigint, 432000000)) RETURNING `+endpointColumns,
			append([]any{n.URL, types, n.Filter.String(), n.Description, secret}, opts...)...))
		if err != nil {
			return err
		}
		return AddRule(ctx, tx, e.ID, "created_at")
	})
	return e, err
}

// AddRule records an endpoint's types and filter as stored as its rule from since (a column of
// relay_endpoints or "now()"): the fan-out matches an event by the rule in force when it was recorded.
func AddRule(ctx context.Context, tx pgx.Tx, id int64, since string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO relay_endpoint_rules (endpoint_id, since, types, filter)
SELECT id, `+since+`, types, filter FROM relay_endpoints WHERE id = $1
ON CONFLICT (endpoint_id, since) DO UPDATE SET types = excluded.types, filter = excluded.filter`, id); err != nil {
		return fmt.Errorf("record the endpoint's rule: %w", err)
	}
	return nil
}

// UpdateEndpoint changes the endpoint's fields that u, checked (EndpointUpdate.Check), gives in tx;
// pgx.ErrNoRows when there is no such endpoint.
func UpdateEndpoint(ctx context.Context, tx pgx.Tx, id int64, u EndpointUpdate) (Endpoint, error) {
	opts, err := u.Options.Args()
	if err != nil {
		return Endpoint{}, err
	}
	var url, types, filter, desc any // nil: keep
	if u.URL != nil {
		url = *u.URL
	}
	if u.Types != nil {
		types = append([]string{}, *u.Types...) // never NULL: an empty list is every type
	}
	if u.Filter != nil {
		filter = u.Filter.String()
	}
	if u.Description != nil {
		desc = *u.Description
	}
	return scanEndpoint(tx.QueryRow(ctx, `UPDATE relay_endpoints
SET url = coalesce($2::text, url), types = coalesce($3::text[], types), description = coalesce($4::text, description),
    filter = coalesce($5::text, filter),
    ordered = coalesce($6::bool, ordered), rate_per_second = coalesce($7::float8, rate_per_second),
    concurrency = coalesce($8::int, concurrency), breaker_failures = coalesce($9::int, breaker_failures),
    disable_after_ms = coalesce($10::bigint, disable_after_ms)
WHERE id = $1 RETURNING `+endpointColumns, append([]any{id, url, types, desc, filter}, opts...)...))
}

// Endpoints lists every endpoint, oldest first.
func (s *Store) Endpoints(ctx context.Context) ([]Endpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+endpointColumns+` FROM relay_endpoints ORDER BY id`)
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
func (s *Store) Endpoint(ctx context.Context, id int64) (Endpoint, error) {
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `SELECT `+endpointColumns+` FROM relay_endpoints WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, fmt.Errorf("endpoint %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("endpoint %d: %w", id, err)
	}
	return e, nil
}

// Disable disables an endpoint in tx with reason and reports whether it was disabled before.
func Disable(ctx context.Context, tx pgx.Tx, id int64, reason string) (e Endpoint, was bool, err error) {
	err = tx.QueryRow(ctx, `SELECT disabled_at IS NOT NULL FROM relay_endpoints WHERE id = $1 FOR NO KEY UPDATE`, id).Scan(&was)
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, false, fmt.Errorf("endpoint %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Endpoint{}, false, fmt.Errorf("disable endpoint %d: %w", id, err)
	}
	e, err = scanEndpoint(tx.QueryRow(ctx, `UPDATE relay_endpoints
SET disabled_at = coalesce(disabled_at, now()), disabled_reason = $2 WHERE id = $1 RETURNING `+endpointColumns, id, reason))
	if err != nil {
		return Endpoint{}, false, fmt.Errorf("disable endpoint %d: %w", id, err)
	}
	return e, was, nil
}

// Enable enables an endpoint in tx: its breaker and failure streak start over; the paused deliveries
// of an endpoint the relay disabled after a sustained failure end dead with skipped as their last
// error unless sendMissed; every other paused or held delivery is pending again, due now. It returns
// the endpoint and those deliveries, in id order, which need a job.
func Enable(ctx context.Context, tx pgx.Tx, id int64, sendMissed bool, skipped string) (Endpoint, []int64, error) {
	var auto bool
	err := tx.QueryRow(ctx, `SELECT auto_disabled FROM relay_endpoints WHERE id = $1 FOR NO KEY UPDATE`, id).Scan(&auto)
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, nil, fmt.Errorf("endpoint %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Endpoint{}, nil, err
	}
	e, err := scanEndpoint(tx.QueryRow(ctx, `UPDATE relay_endpoints
SET disabled_at = NULL, disabled_reason = '', consecutive_failures = 0, alerted_failures = 0, failing_since = NULL,
    probe_delivery = NULL, probe_at = NULL, probes = 0, auto_disabled = false
WHERE id = $1 RETURNING `+endpointColumns, id))
	if err != nil {
		return Endpoint{}, nil, err
	}
	if auto && !sendMissed {
		if _, err := tx.Exec(ctx, `UPDATE relay_deliveries SET state = 'dead', next_attempt_at = NULL, completed_at = now(),
    last_error = $2 WHERE endpoint_id = $1 AND state = 'paused'`, id, skipped); err != nil {
			return Endpoint{}, nil, err
		}
	}
	ids, err := collectIDs(tx.Query(ctx, `UPDATE relay_deliveries
SET run_attempts = CASE WHEN state = 'paused' THEN 0 ELSE run_attempts END, state = 'pending', held = NULL, next_attempt_at = now()
WHERE endpoint_id = $1 AND (state = 'paused' OR (state = 'pending' AND held IS NOT NULL)) RETURNING id`, id))
	if err != nil {
		return Endpoint{}, nil, err
	}
	slices.Sort(ids)
	return e, ids, nil
}

// RotateSecret makes secret the endpoint's, the current one signing alongside it for overlap.
func (s *Store) RotateSecret(ctx context.Context, id int64, secret string, overlap time.Duration) (Endpoint, error) {
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `UPDATE relay_endpoints
SET previous_secret = secret, previous_until = now() + $3::interval, secret = $2
WHERE id = $1 RETURNING `+endpointColumns, id, secret, overlap.String()))
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, fmt.Errorf("endpoint %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("rotate secret of endpoint %d: %w", id, err)
	}
	return e, nil
}

// RemoveEndpoint deletes an endpoint with its deliveries, attempts and alerts; jobs still queued for
// them find nothing and end.
func (s *Store) RemoveEndpoint(ctx context.Context, id int64) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM relay_endpoints WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("remove endpoint %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("endpoint %d: %w", id, ErrNotFound)
	}
	return nil
}

// EndpointLabel returns an endpoint's URL and description.
func EndpointLabel(ctx context.Context, tx pgx.Tx, id int64) (url, desc string, err error) {
	if err := tx.QueryRow(ctx, `SELECT url, description FROM relay_endpoints WHERE id = $1`, id).Scan(&url, &desc); err != nil {
		return "", "", fmt.Errorf("endpoint %d: %w", id, err)
	}
	return url, desc, nil
}

// AnyEndpoint reports whether an endpoint exists, enabled or not: without one the fan-out plans
// nothing.
func AnyEndpoint(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (bool, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM relay_endpoints)`).Scan(&exists); err != nil {
		return false, fmt.Errorf("endpoints: %w", err)
	}
	return exists, nil
}

// FanoutEndpoints loads every endpoint with its rules (relay_endpoint_rules), as the pure fan-out
// (projections/relay) takes them. An endpoint without a recorded rule has its stored types and filter
// as its only one.
func FanoutEndpoints(ctx context.Context, q Querier) ([]prelay.Endpoint, error) {
	rows, err := q.Query(ctx, `SELECT e.id, e.created_at, e.disabled_at IS NOT NULL, e.types, e.filter,
    coalesce(r.since, e.created_at), coalesce(r.types, e.types), coalesce(r.filter, e.filter)
FROM relay_endpoints e LEFT JOIN relay_endpoint_rules r ON r.endpoint_id = e.id
ORDER BY e.id, r.since`)
	if err != nil {
		return nil, fmt.Errorf("endpoints: %w", err)
	}
	defer rows.Close()
	var eps []prelay.Endpoint
	for rows.Next() {
		var (
			id                 int64
			created, since     time.Time
			disabled           bool
			types, ruleTypes   []string
			filter, ruleFilter string
		)
		if err := rows.Scan(&id, &created, &disabled, &types, &filter, &since, &ruleTypes, &ruleFilter); err != nil {
			return nil, fmt.Errorf("endpoints: %w", err)
		}
		f, err := prelay.ParseFilter(ruleFilter)
		if err != nil {
			return nil, fmt.Errorf("endpoint %d: stored filter %q: %w", id, ruleFilter, err)
		}
		if n := len(eps); n == 0 || eps[n-1].ID != id {
			eps = append(eps, prelay.Endpoint{ID: id, Created: created, Disabled: disabled})
		}
		last := &eps[len(eps)-1]
		last.Rules = append(last.Rules, prelay.Rule{Since: since, Types: ruleTypes, Filter: f})
	}
	return eps, rows.Err()
}

// OperationalTargets returns the enabled endpoints but except, in id order.
func OperationalTargets(ctx context.Context, tx pgx.Tx, except int64) ([]prelay.Subscriber, error) {
	rows, err := tx.Query(ctx, `SELECT id, types FROM relay_endpoints WHERE disabled_at IS NULL AND id <> $1 ORDER BY id`, except)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (prelay.Subscriber, error) {
		var t prelay.Subscriber
		return t, row.Scan(&t.ID, &t.Types)
	})
}
