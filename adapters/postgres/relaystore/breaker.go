package relaystore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	prelay "bookingledger/projections/relay"
)

// Due is a delivery and when its next attempt is due.
type Due struct {
	ID int64
	At time.Time
}

// ReleaseHeld ends the wait of each pending delivery of the endpoint held for why: due at at (zero:
// now), or at its own later due time. The caller gives each a job.
func ReleaseHeld(ctx context.Context, tx pgx.Tx, endpointID int64, why string, at time.Time) ([]Due, error) {
	rows, err := tx.Query(ctx, `UPDATE relay_deliveries
SET held = NULL, next_attempt_at = greatest(coalesce($3, now()), coalesce(next_attempt_at, now()))
WHERE endpoint_id = $1 AND held = $2 AND state = 'pending' RETURNING id, next_attempt_at`, endpointID, why, nullTime(at))
	if err != nil {
		return nil, fmt.Errorf("release deliveries held by %s: %w", why, err)
	}
	ds, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Due, error) {
		var d Due
		return d, row.Scan(&d.ID, &d.At)
	})
	if err != nil {
		return nil, fmt.Errorf("release deliveries held by %s: %w", why, err)
	}
	return ds, nil
}

// Hold marks the pending deliveries of ids not yet held as held for why. One held by the breaker
// keeps its own due time (a Retry-After, its schedule's wait): released, it is not attempted before
// it.
func Hold(ctx context.Context, tx pgx.Tx, ids []int64, why string) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `UPDATE relay_deliveries SET held = $2, next_attempt_at = CASE WHEN $2 = 'order' THEN NULL ELSE next_attempt_at END
WHERE id = ANY($1) AND state = 'pending' AND held IS NULL`, ids, why); err != nil {
		return fmt.Errorf("hold deliveries (%s): %w", why, err)
	}
	return nil
}

// OrderBlocked returns those of ids (deliveries to ordered endpoints) whose booking has an earlier
// version pending or paused, locking those earlier ones (shared).
func OrderBlocked(ctx context.Context, tx pgx.Tx, ids []int64) ([]int64, error) {
	blocked, err := collectIDs(tx.Query(ctx, `SELECT d.id FROM relay_deliveries d
JOIN relay_deliveries p ON p.endpoint_id = d.endpoint_id AND p.stream = d.stream AND p.stream_version < d.stream_version
WHERE d.id = ANY($1) AND p.state IN ('pending', 'paused') ORDER BY p.id FOR SHARE OF p`, ids))
	if err != nil {
		return nil, fmt.Errorf("order: %w", err)
	}
	return blocked, nil
}

// LoadGate reads the endpoint's gate (its breaker and throttle, as projections/relay.Admit reads
// them) and locks its row; false when it was removed.
func LoadGate(ctx context.Context, tx pgx.Tx, ep int64) (prelay.Gate, bool, error) {
	var (
		g                 prelay.Gate
		probe             *int64
		probeAt, nextSlot *time.Time
	)
	err := tx.QueryRow(ctx, `SELECT e.consecutive_failures, e.breaker_failures, e.probe_delivery,
    coalesce((SELECT p.state = 'pending' AND p.held IS NULL FROM relay_deliveries p WHERE p.id = e.probe_delivery), false),
    e.probe_at, e.rate_per_second, e.throttle_next_at,
    EXISTS (SELECT 1 FROM relay_deliveries h WHERE h.endpoint_id = e.id AND h.held = 'breaker' AND h.state = 'pending')
FROM relay_endpoints e WHERE e.id = $1 FOR NO KEY UPDATE`, ep).Scan(&g.Failures, &g.Threshold, &probe, &g.ProbeValid, &probeAt, &g.Rate, &nextSlot, &g.Backlog)
	if errors.Is(err, pgx.ErrNoRows) {
		return prelay.Gate{}, false, nil
	}
	if err != nil {
		return prelay.Gate{}, false, fmt.Errorf("endpoint %d: %w", ep, err)
	}
	g.Probe, g.ProbeAt, g.NextSlot = deref(probe), deref(probeAt), deref(nextSlot)
	return g, true, nil
}

// SetProbe makes a delivery the endpoint's breaker probe.
func SetProbe(ctx context.Context, tx pgx.Tx, ep, id int64) error {
	if _, err := tx.Exec(ctx, `UPDATE relay_endpoints SET probe_delivery = $2 WHERE id = $1`, ep, id); err != nil {
		return fmt.Errorf("endpoint %d: probe: %w", ep, err)
	}
	return nil
}

// SetThrottle records the endpoint's next free send slot.
func SetThrottle(ctx context.Context, tx pgx.Tx, ep int64, next time.Time) error {
	if _, err := tx.Exec(ctx, `UPDATE relay_endpoints SET throttle_next_at = $2 WHERE id = $1`, ep, next); err != nil {
		return fmt.Errorf("endpoint %d: throttle: %w", ep, err)
	}
	return nil
}

// Defer moves the pending deliveries' next attempts.
func Defer(ctx context.Context, tx pgx.Tx, ds []Due) error {
	if len(ds) == 0 {
		return nil
	}
	ids, ats := make([]int64, len(ds)), make([]time.Time, len(ds))
	for i, d := range ds {
		ids[i], ats[i] = d.ID, d.At
	}
	if _, err := tx.Exec(ctx, `UPDATE relay_deliveries d SET next_attempt_at = x.at
FROM unnest($1::bigint[], $2::timestamptz[]) AS x(id, at) WHERE d.id = x.id AND d.state = 'pending'`, ids, ats); err != nil {
		return fmt.Errorf("defer deliveries: %w", err)
	}
	return nil
}

// Released is a delivery whose wait for an earlier version ended.
type Released struct {
	ID, Endpoint int64
}

// ReleaseNextVersions ends the wait of the next held version of each (endpoint, stream) pair, due
// now; the caller gives each a job.
func ReleaseNextVersions(ctx context.Context, tx pgx.Tx, eps []int64, streams []string) ([]Released, error) {
	rows, err := tx.Query(ctx, `WITH nxt AS (
  SELECT DISTINCT ON (d.endpoint_id, d.stream) d.id FROM relay_deliveries d
  JOIN unnest($1::bigint[], $2::text[]) AS x(e, s) ON d.endpoint_id = x.e AND d.stream = x.s
  WHERE d.held = 'order' AND d.state = 'pending' ORDER BY d.endpoint_id, d.stream, d.stream_version)
UPDATE relay_deliveries d SET held = NULL, next_attempt_at = now() FROM nxt WHERE d.id = nxt.id
RETURNING d.id, d.endpoint_id`, eps, streams)
	if err != nil {
		return nil, fmt.Errorf("release next versions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Released, error) {
		var r Released
		return r, row.Scan(&r.ID, &r.Endpoint)
	})
	if err != nil {
		return nil, fmt.Errorf("release next versions: %w", err)
	}
	return out, nil
}

// LoadBreaker reads and locks the breaker of an endpoint that has a streak, a failing-since or a
// probe, as projections/relay.AfterRound reads it (the probe only while the breaker is open, with
// whether it is still pending and not held); false for a healthy one.
func LoadBreaker(ctx context.Context, tx pgx.Tx, ep int64) (prelay.Breaker, bool, error) {
	var (
		b              prelay.Breaker
		ms             int64
		since, probeAt *time.Time
		probe          *int64
	)
	err := tx.QueryRow(ctx, `SELECT consecutive_failures, breaker_failures, failing_since, probe_delivery, probe_at, probes,
    disable_after_ms, disabled_at IS NOT NULL
FROM relay_endpoints WHERE id = $1 AND (consecutive_failures > 0 OR failing_since IS NOT NULL OR probe_delivery IS NOT NULL) FOR NO KEY UPDATE`,
		ep).Scan(&b.Failures, &b.Threshold, &since, &probe, &probeAt, &b.Probes, &ms, &b.Disabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return prelay.Breaker{}, false, nil
	}
	if err != nil {
		return prelay.Breaker{}, false, fmt.Errorf("breaker of endpoint %d: %w", ep, err)
	}
	b.DisableAfter = time.Duration(ms) * time.Millisecond
	b.Since, b.ProbeAt = deref(since), deref(probeAt)
	if probe != nil && b.Open() {
		b.Probe = *probe
		if b.ProbeValid, err = probeValid(ctx, tx, b.Probe); err != nil {
			return prelay.Breaker{}, false, fmt.Errorf("endpoint %d: probe: %w", ep, err)
		}
	}
	return b, true, nil
}

// CloseBreaker clears an endpoint's failing-since and probe.
func CloseBreaker(ctx context.Context, tx pgx.Tx, ep int64) error {
	if _, err := tx.Exec(ctx, `UPDATE relay_endpoints SET failing_since = NULL, probe_delivery = NULL, probe_at = NULL, probes = 0
WHERE id = $1`, ep); err != nil {
		return fmt.Errorf("close breaker of endpoint %d: %w", ep, err)
	}
	return nil
}

// SetFailingSince records when an endpoint's failure streak began.
func SetFailingSince(ctx context.Context, tx pgx.Tx, ep int64, since time.Time) error {
	if _, err := tx.Exec(ctx, `UPDATE relay_endpoints SET failing_since = $2 WHERE id = $1`, ep, since); err != nil {
		return fmt.Errorf("endpoint %d: failing since: %w", ep, err)
	}
	return nil
}

// probeValid reports whether the delivery is pending and not held.
func probeValid(ctx context.Context, tx pgx.Tx, id int64) (bool, error) {
	var valid bool
	err := tx.QueryRow(ctx, `SELECT coalesce((SELECT state = 'pending' AND held IS NULL FROM relay_deliveries WHERE id = $1), false)`,
		id).Scan(&valid)
	return valid, err
}

// ScheduleProbe makes a delivery's next attempt due at at; protect gives back the attempt its
// failure as a probe used of its schedule.
func ScheduleProbe(ctx context.Context, tx pgx.Tx, id int64, at time.Time, protect bool) error {
	_, err := tx.Exec(ctx, `UPDATE relay_deliveries SET next_attempt_at = $2,
    run_attempts = CASE WHEN $3 THEN greatest(run_attempts - 1, 0) ELSE run_attempts END WHERE id = $1`, id, at, protect)
	return err
}

// PromoteProbe ends the wait of the endpoint's oldest delivery held by the breaker, due at at or its
// own later due time; false when there is none.
func PromoteProbe(ctx context.Context, tx pgx.Tx, ep int64, at time.Time) (Due, bool, error) {
	var d Due
	err := tx.QueryRow(ctx, `UPDATE relay_deliveries SET held = NULL, next_attempt_at = greatest($2, coalesce(next_attempt_at, $2))
WHERE id = (SELECT id FROM relay_deliveries WHERE endpoint_id = $1 AND held = 'breaker' AND state = 'pending' ORDER BY id LIMIT 1)
RETURNING id, next_attempt_at`, ep, at).Scan(&d.ID, &d.At)
	if errors.Is(err, pgx.ErrNoRows) {
		return Due{}, false, nil
	}
	return d, err == nil, err
}

// SetBreaker records an open breaker: since, its probe and when it may go (0 and zero: none), its
// probes.
func SetBreaker(ctx context.Context, tx pgx.Tx, ep int64, since time.Time, probe int64, at time.Time, probes int) error {
	var probeArg *int64 // 0: none
	if probe != 0 {
		probeArg = &probe
	}
	if _, err := tx.Exec(ctx, `UPDATE relay_endpoints SET failing_since = $2, probe_delivery = $3, probe_at = $4, probes = $5
WHERE id = $1`, ep, since, probeArg, nullTime(at), probes); err != nil {
		return fmt.Errorf("endpoint %d: breaker: %w", ep, err)
	}
	return nil
}

// DisableSustained disables an endpoint after a sustained failure and pauses its pending deliveries,
// which it returns.
func DisableSustained(ctx context.Context, tx pgx.Tx, ep int64, reason string) ([]int64, error) {
	if _, err := tx.Exec(ctx, `UPDATE relay_endpoints SET disabled_at = coalesce(disabled_at, now()), disabled_reason = $2,
    auto_disabled = true, probe_delivery = NULL, probe_at = NULL WHERE id = $1`, ep, reason); err != nil {
		return nil, fmt.Errorf("disable endpoint %d: %w", ep, err)
	}
	ids, err := collectIDs(tx.Query(ctx, `UPDATE relay_deliveries SET state = 'paused', held = NULL, next_attempt_at = NULL
WHERE endpoint_id = $1 AND state = 'pending' RETURNING id`, ep))
	if err != nil {
		return nil, fmt.Errorf("pause deliveries of endpoint %d: %w", ep, err)
	}
	return ids, nil
}

// PauseDisabled pauses the pending deliveries of endpoint ep, held ones included, if it is disabled,
// and returns them. DisableSustained pauses the deliveries its statement sees; a transaction that read
// the endpoint as enabled before the disable committed can still commit one after that statement — an
// admission holding it behind an earlier version, say — and a held delivery has no job that would
// find the endpoint disabled later. Run after the disable committed, when every later reader sees
// the endpoint disabled, this catches the last of them.
func (s *Store) PauseDisabled(ctx context.Context, ep int64) ([]int64, error) {
	ids, err := collectIDs(s.pool.Query(ctx, `UPDATE relay_deliveries d SET state = 'paused', held = NULL, next_attempt_at = NULL
FROM relay_endpoints e WHERE e.id = $1 AND e.disabled_at IS NOT NULL AND d.endpoint_id = e.id AND d.state = 'pending'
RETURNING d.id`, ep))
	if err != nil {
		return nil, fmt.Errorf("pause deliveries of disabled endpoint %d: %w", ep, err)
	}
	return ids, nil
}
