package relay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// Defaults of an endpoint's delivery settings.
const (
	// DefaultBreakerFailures is the failure streak that opens an endpoint's circuit breaker.
	DefaultBreakerFailures = 5
	// DefaultDisableAfter is how long a failure streak lasts before the relay disables the endpoint.
	DefaultDisableAfter = 5 * 24 * time.Hour
	// MaxRate, MaxConcurrency and MaxBreakerFailures bound the settings.
	MaxRate            = 10000
	MaxConcurrency     = 1024
	MaxBreakerFailures = 1000
	// throttleWindow is how far ahead of now a round takes its endpoint's send slots; a delivery whose
	// slot is later gets a job due then.
	throttleWindow = time.Second
)

// Reasons the relay holds a pending delivery without a job (relay_deliveries.held).
const (
	heldOrder   = "order"
	heldBreaker = "breaker"
)

// HeldReasons are the values of relay_deliveries.held (its CHECK list).
var HeldReasons = []string{heldOrder, heldBreaker}

// SustainedFailureReason starts the disabled reason of an endpoint the relay disabled after a
// sustained failure.
const SustainedFailureReason = "failing for longer than"

// Settings are how an endpoint is sent to (docs/relay.md, "Order, throttle and breaker").
type Settings struct {
	// Ordered: a booking's messages reach the endpoint in stream-version order.
	Ordered bool
	// RatePerSecond and Concurrency throttle the endpoint (0: unlimited). Concurrency counts the
	// attempts in flight of one serve instance.
	RatePerSecond float64
	Concurrency   int
	// BreakerFailures is the failure streak that opens the breaker (0: no breaker).
	BreakerFailures int
	// DisableAfter is how long a failure streak lasts before the endpoint is disabled (0: never).
	DisableAfter time.Duration
	// AutoDisabled: the relay disabled the endpoint after a sustained failure.
	AutoDisabled bool
	// FailingSince is when the current failure streak began (zero: none); ProbeAt when the open
	// breaker's next probe may go (zero: none).
	FailingSince, ProbeAt time.Time

	disableAfterMS        int64
	failingSince, probeAt *time.Time
}

const deliveryColumnsOfEndpoint = `ordered, rate_per_second, concurrency, breaker_failures, disable_after_ms,
failing_since, probe_at, auto_disabled`

func (s *Settings) fill() {
	s.DisableAfter = time.Duration(s.disableAfterMS) * time.Millisecond
	if s.failingSince != nil {
		s.FailingSince = *s.failingSince
	}
	if s.probeAt != nil {
		s.ProbeAt = *s.probeAt
	}
}

// BreakerOpen reports whether the endpoint's breaker is open: its failure streak reached
// BreakerFailures, so only one probe at a time is sent.
func (e Endpoint) BreakerOpen() bool {
	return e.BreakerFailures > 0 && e.ConsecutiveFailures >= e.BreakerFailures
}

// SettingsUpdate changes an endpoint's delivery settings; a nil field keeps its value (AddEndpoint:
// takes its default).
type SettingsUpdate struct {
	Ordered         *bool
	RatePerSecond   *float64
	Concurrency     *int
	BreakerFailures *int
	DisableAfter    *time.Duration
}

// values checks u and returns the query arguments of its fields (nil: keep).
func (u SettingsUpdate) values() ([]any, error) {
	out := make([]any, 5)
	if u.Ordered != nil {
		out[0] = *u.Ordered
	}
	if u.RatePerSecond != nil {
		v := *u.RatePerSecond
		if math.IsNaN(v) || v < 0 || v > MaxRate {
			return nil, fmt.Errorf("%w: rate must be 0 (unlimited) to %d per second", ErrInvalid, MaxRate)
		}
		out[1] = v
	}
	if u.Concurrency != nil {
		if *u.Concurrency < 0 || *u.Concurrency > MaxConcurrency {
			return nil, fmt.Errorf("%w: concurrency must be 0 (unlimited) to %d", ErrInvalid, MaxConcurrency)
		}
		out[2] = int32(*u.Concurrency)
	}
	if u.BreakerFailures != nil {
		if *u.BreakerFailures < 0 || *u.BreakerFailures > MaxBreakerFailures {
			return nil, fmt.Errorf("%w: breaker failures must be 0 (no breaker) to %d", ErrInvalid, MaxBreakerFailures)
		}
		out[3] = int32(*u.BreakerFailures)
	}
	if u.DisableAfter != nil {
		d := *u.DisableAfter
		if d != 0 && (d < time.Second || d > 365*24*time.Hour) {
			return nil, fmt.Errorf("%w: disable-after must be 0 (never) or 1s to 8760h", ErrInvalid)
		}
		out[4] = d.Milliseconds()
	}
	return out, nil
}

// settingsChanged gives a job to the deliveries an endpoint's new settings no longer hold.
func (r *Relay) settingsChanged(ctx context.Context, tx pgx.Tx, e Endpoint) error {
	if !e.Ordered {
		if err := r.releaseHeld(ctx, tx, e.ID, heldOrder, time.Time{}); err != nil {
			return err
		}
	}
	if !e.BreakerOpen() {
		return r.releaseHeld(ctx, tx, e.ID, heldBreaker, time.Time{})
	}
	return nil
}

// releaseHeld gives each delivery of the endpoint held for why a job, due at at (zero: now).
func (r *Relay) releaseHeld(ctx context.Context, tx pgx.Tx, endpointID int64, why string, at time.Time) error {
	rows, err := tx.Query(ctx, `UPDATE relay_deliveries
SET held = NULL, next_attempt_at = greatest(coalesce($3, now()), coalesce(next_attempt_at, now()))
WHERE endpoint_id = $1 AND held = $2 AND state = 'pending' RETURNING id, next_attempt_at`, endpointID, why, nullTime(at))
	if err != nil {
		return fmt.Errorf("release deliveries held by %s: %w", why, err)
	}
	type due struct {
		id int64
		at time.Time
	}
	ds, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (due, error) {
		var d due
		return d, row.Scan(&d.id, &d.at)
	})
	if err != nil {
		return fmt.Errorf("release deliveries held by %s: %w", why, err)
	}
	slices.SortFunc(ds, func(a, b due) int { return int(a.id - b.id) })
	now := r.clock()
	var nowIDs []int64
	var params []river.InsertManyParams
	for _, d := range ds {
		if d.at.After(now) {
			params = jobParams(params, []int64{d.id}, d.at)
		} else {
			nowIDs = append(nowIDs, d.id)
		}
	}
	params = jobParams(params, nowIDs, at)
	return r.insertJobs(ctx, tx, params)
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// EnableAndSendMissed enables an endpoint and resumes every paused delivery, also those of an
// endpoint the relay disabled after a sustained failure; on an ordered endpoint each booking's go
// out in version order.
func (r *Relay) EnableAndSendMissed(ctx context.Context, id int64) (Endpoint, int, error) {
	return r.enable(ctx, id, true)
}

// SkippedOnEnable is the last error of the paused deliveries that enable (without send-missed) ends.
const SkippedOnEnable = "skipped: the endpoint was enabled without --send-missed"

// enable resumes an endpoint. The paused deliveries of an endpoint the relay disabled after a
// sustained failure (days of events, maybe) resume only with sendMissed; without it they end dead
// (SkippedOnEnable), so that an ordered endpoint's bookings go on and their next message names the
// skipped versions; replay sends them later. Held deliveries get a job either way, and the breaker
// and failure streak start over.
func (r *Relay) enable(ctx context.Context, id int64, sendMissed bool) (Endpoint, int, error) {
	var (
		e Endpoint
		n int
	)
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		var auto bool
		err := tx.QueryRow(ctx, `SELECT auto_disabled FROM relay_endpoints WHERE id = $1 FOR UPDATE`, id).Scan(&auto)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("endpoint %d: %w", id, ErrNotFound)
		}
		if err != nil {
			return err
		}
		e, err = scanEndpoint(tx.QueryRow(ctx, `UPDATE relay_endpoints
SET disabled_at = NULL, disabled_reason = '', consecutive_failures = 0, alerted_failures = 0, failing_since = NULL,
    probe_delivery = NULL, probe_at = NULL, probes = 0, auto_disabled = false
WHERE id = $1 RETURNING `+endpointColumns, id))
		if err != nil {
			return err
		}
		if auto && !sendMissed {
			if _, err := tx.Exec(ctx, `UPDATE relay_deliveries SET state = 'dead', next_attempt_at = NULL, completed_at = now(),
    last_error = $2 WHERE endpoint_id = $1 AND state = 'paused'`, id, SkippedOnEnable); err != nil {
				return err
			}
		}
		ids, err := collectIDs(tx.Query(ctx, `UPDATE relay_deliveries
SET run_attempts = CASE WHEN state = 'paused' THEN 0 ELSE run_attempts END, state = 'pending', held = NULL, next_attempt_at = now()
WHERE endpoint_id = $1 AND (state = 'paused' OR (state = 'pending' AND held IS NOT NULL)) RETURNING id`, id))
		if err != nil {
			return err
		}
		slices.Sort(ids)
		n = len(ids)
		return r.enqueue(ctx, tx, ids, time.Time{})
	})
	if err != nil {
		return Endpoint{}, 0, fmt.Errorf("enable endpoint %d: %w", id, err)
	}
	return e, n, nil
}

// gated reports whether a delivery passes admit's checks: its endpoint is ordered, throttled by rate
// or has an open breaker.
func (d delivery) gated() bool {
	return d.ordered || d.rate > 0 || (d.breakerFailures > 0 && d.failures >= d.breakerFailures)
}

// admit decides which of a round's deliveries go now, in one transaction. On an ordered endpoint a
// delivery whose booking has an earlier version pending or paused is held ('order') until that one
// ends; behind an open breaker every delivery but the one probe is held ('breaker') until a success
// closes it; under a rate each delivery takes the endpoint's next send slot (notBefore) or, past
// throttleWindow, gets a job due at its slot (deferred). A held delivery has no job: whoever ends its
// wait gives it one, in the transaction that ends it. Locks: the earlier versions (shared) before the
// endpoint row, as record takes the deliveries' rows before the endpoint's.
func (r *Relay) admit(ctx context.Context, ds []delivery) (send []delivery, deferred map[int64]time.Time, held map[int64]bool, err error) {
	if !slices.ContainsFunc(ds, delivery.gated) {
		return ds, nil, nil, nil
	}
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		send, deferred, held = nil, map[int64]time.Time{}, map[int64]bool{}
		var ordered []int64
		for _, d := range ds {
			if d.ordered {
				ordered = append(ordered, d.id)
			}
		}
		if len(ordered) > 0 {
			blocked, err := collectIDs(tx.Query(ctx, `SELECT d.id FROM relay_deliveries d
JOIN relay_deliveries p ON p.endpoint_id = d.endpoint_id AND p.stream = d.stream AND p.stream_version < d.stream_version
WHERE d.id = ANY($1) AND p.state IN ('pending', 'paused') ORDER BY p.id FOR SHARE OF p`, ordered))
			if err != nil {
				return fmt.Errorf("order: %w", err)
			}
			for _, id := range blocked {
				held[id] = true
			}
			if err := holdRows(ctx, tx, held, heldOrder); err != nil {
				return err
			}
		}
		byEndpoint := map[int64][]delivery{}
		var eps []int64
		for _, d := range ds {
			if held[d.id] {
				continue
			}
			if _, ok := byEndpoint[d.endpointID]; !ok {
				eps = append(eps, d.endpointID)
			}
			byEndpoint[d.endpointID] = append(byEndpoint[d.endpointID], d)
		}
		for _, ep := range eps {
			group := byEndpoint[ep]
			if d := group[0]; d.rate <= 0 && (d.breakerFailures == 0 || d.failures < d.breakerFailures) {
				send = append(send, group...)
				continue
			}
			ok, err := r.admitEndpoint(ctx, tx, ep, group, deferred, held)
			if err != nil {
				return err
			}
			send = append(send, ok...)
		}
		if len(deferred) > 0 {
			ids, ats := make([]int64, 0, len(deferred)), make([]time.Time, 0, len(deferred))
			for id, at := range deferred {
				ids, ats = append(ids, id), append(ats, at)
			}
			if _, err := tx.Exec(ctx, `UPDATE relay_deliveries d SET next_attempt_at = x.at
FROM unnest($1::bigint[], $2::timestamptz[]) AS x(id, at) WHERE d.id = x.id AND d.state = 'pending'`, ids, ats); err != nil {
				return fmt.Errorf("defer deliveries: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("admit deliveries: %w", err)
	}
	return send, deferred, held, nil
}

// holdRows marks the deliveries of ids not yet marked as held for why.
func holdRows(ctx context.Context, tx pgx.Tx, ids map[int64]bool, why string) error {
	if len(ids) == 0 {
		return nil
	}
	list := make([]int64, 0, len(ids))
	for id := range ids {
		list = append(list, id)
	}
	// A delivery held by the breaker keeps its own due time (a Retry-After, its schedule's wait):
	// released, it is not attempted before it.
	if _, err := tx.Exec(ctx, `UPDATE relay_deliveries SET held = $2, next_attempt_at = CASE WHEN $2 = 'order' THEN NULL ELSE next_attempt_at END
WHERE id = ANY($1) AND state = 'pending' AND held IS NULL`, list, why); err != nil {
		return fmt.Errorf("hold deliveries (%s): %w", why, err)
	}
	return nil
}

// admitEndpoint applies an endpoint's breaker and rate to its deliveries of a round (id order), with
// the endpoint's row locked.
func (r *Relay) admitEndpoint(ctx context.Context, tx pgx.Tx, ep int64, group []delivery, deferred map[int64]time.Time, held map[int64]bool) ([]delivery, error) {
	var (
		failures, threshold int
		probe               *int64
		probeValid          bool
		probeAt, nextSlot   *time.Time
		rate                float64
		backlog             bool
	)
	err := tx.QueryRow(ctx, `SELECT e.consecutive_failures, e.breaker_failures, e.probe_delivery,
    coalesce((SELECT p.state = 'pending' AND p.held IS NULL FROM relay_deliveries p WHERE p.id = e.probe_delivery), false),
    e.probe_at, e.rate_per_second, e.throttle_next_at,
    EXISTS (SELECT 1 FROM relay_deliveries h WHERE h.endpoint_id = e.id AND h.held = 'breaker' AND h.state = 'pending')
FROM relay_endpoints e WHERE e.id = $1 FOR UPDATE`, ep).Scan(&failures, &threshold, &probe, &probeValid, &probeAt, &rate, &nextSlot, &backlog)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil // removed meanwhile: its deliveries are gone
	}
	if err != nil {
		return nil, fmt.Errorf("endpoint %d: %w", ep, err)
	}
	now := r.clock()
	candidates := group
	if threshold > 0 && failures >= threshold {
		candidates = nil
		newProbe := probe
		breakerHeld := map[int64]bool{}
		for _, d := range group {
			isProbe := probe != nil && *probe == d.id
			if !isProbe && (probeValid || newProbe != probe) {
				breakerHeld[d.id] = true
				continue
			}
			newProbe = &d.id
			if probeAt == nil || !probeAt.After(now) {
				// Protecting a backlog, the probe's failures do not use up its own schedule.
				d.probe = backlog || len(breakerHeld) > 0 || len(group) > 1
				candidates = append(candidates, d)
			} else {
				deferred[d.id] = *probeAt
			}
		}
		if err := holdRows(ctx, tx, breakerHeld, heldBreaker); err != nil {
			return nil, err
		}
		for id := range breakerHeld {
			held[id] = true
		}
		if newProbe != probe {
			if _, err := tx.Exec(ctx, `UPDATE relay_endpoints SET probe_delivery = $2 WHERE id = $1`, ep, *newProbe); err != nil {
				return nil, fmt.Errorf("endpoint %d: probe: %w", ep, err)
			}
		}
	}
	if rate <= 0 || len(candidates) == 0 {
		return candidates, nil
	}
	step := time.Duration(float64(time.Second) / rate)
	start := now
	if nextSlot != nil && nextSlot.After(start) {
		start = *nextSlot
	}
	var send []delivery
	slot := start
	for _, d := range candidates {
		if slot.After(now.Add(throttleWindow)) {
			deferred[d.id] = slot
		} else {
			d.notBefore = slot
			send = append(send, d)
		}
		slot = slot.Add(step)
	}
	if _, err := tx.Exec(ctx, `UPDATE relay_endpoints SET throttle_next_at = $2 WHERE id = $1`, ep, start.Add(step*time.Duration(len(send)))); err != nil {
		return nil, fmt.Errorf("endpoint %d: throttle: %w", ep, err)
	}
	return send, nil
}

// releaseOrder gives the next held version of each booking whose delivery the round ended (succeeded
// or dead) a job, in the round's transaction; admit holds it again if an earlier version is still
// pending.
func (r *Relay) releaseOrder(ctx context.Context, tx pgx.Tx, round []sent, kept map[int64]bool) error {
	var eps []int64
	var streams []string
	for _, s := range round {
		if kept[s.d.id] && s.d.ordered && (s.state == StateSucceeded || s.state == StateDead) {
			eps, streams = append(eps, s.d.endpointID), append(streams, s.d.stream)
		}
	}
	if len(eps) == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `WITH nxt AS (
  SELECT DISTINCT ON (d.endpoint_id, d.stream) d.id FROM relay_deliveries d
  JOIN unnest($1::bigint[], $2::text[]) AS x(e, s) ON d.endpoint_id = x.e AND d.stream = x.s
  WHERE d.held = 'order' AND d.state = 'pending' ORDER BY d.endpoint_id, d.stream, d.stream_version)
UPDATE relay_deliveries d SET held = NULL, next_attempt_at = now() FROM nxt WHERE d.id = nxt.id
RETURNING d.id, d.endpoint_id`, eps, streams)
	if err != nil {
		return fmt.Errorf("release next versions: %w", err)
	}
	byEP := map[int64][]int64{}
	var order []int64
	for rows.Next() {
		var id, ep int64
		if err := rows.Scan(&id, &ep); err != nil {
			rows.Close()
			return fmt.Errorf("release next versions: %w", err)
		}
		if _, ok := byEP[ep]; !ok {
			order = append(order, ep)
		}
		byEP[ep] = append(byEP[ep], id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("release next versions: %w", err)
	}
	var params []river.InsertManyParams
	for _, ep := range order {
		slices.Sort(byEP[ep])
		params = jobParams(params, byEP[ep], time.Time{})
	}
	return r.insertJobs(ctx, tx, params)
}

// afterRound applies a round's attempts to the breakers of its endpoints, after their streaks were
// counted: an endpoint whose streak ended releases what its breaker held; one whose streak reached
// its breaker's threshold keeps one probe (paced by the retry schedule: the k-th probe waits the
// schedule's k-th wait) and holds the round's other failures; one failing for longer than its
// DisableAfter is disabled, its pending deliveries paused, with an alert. moved gets the round's
// deliveries whose next attempt it changed (zero: held or paused, no job), and later is updated to
// match.
func (r *Relay) afterRound(ctx context.Context, tx pgx.Tx, round []sent, kept map[int64]bool, later, moved map[int64]time.Time) ([]alertNote, error) {
	var eps []int64
	for _, s := range round {
		if kept[s.d.id] && !slices.Contains(eps, s.d.endpointID) {
			eps = append(eps, s.d.endpointID)
		}
	}
	slices.Sort(eps)
	var notes []alertNote
	for _, ep := range eps {
		var failed []sent // still pending after a failure, in id order
		var lastFail, firstFail time.Time
		probeAttempted, probeProtected := false, false
		var probeRetryAfter time.Time
		for _, s := range round {
			if s.d.endpointID != ep || !kept[s.d.id] || s.a.outcome != OutcomeFailed {
				continue
			}
			end := s.a.at.Add(s.a.latency)
			if end.After(lastFail) {
				lastFail = end
			}
			if firstFail.IsZero() || end.Before(firstFail) {
				firstFail = end
			}
			if s.state == StatePending {
				failed = append(failed, s)
			}
		}
		slices.SortFunc(failed, func(a, b sent) int { return int(a.d.id - b.d.id) })
		var (
			failures, threshold, probes int
			since, probeAt              *time.Time
			probe                       *int64
			disableMS                   int64
			disabled                    bool
		)
		err := tx.QueryRow(ctx, `SELECT consecutive_failures, breaker_failures, failing_since, probe_delivery, probe_at, probes,
    disable_after_ms, disabled_at IS NOT NULL
FROM relay_endpoints WHERE id = $1 AND (consecutive_failures > 0 OR failing_since IS NOT NULL OR probe_delivery IS NOT NULL) FOR UPDATE`,
			ep).Scan(&failures, &threshold, &since, &probe, &probeAt, &probes, &disableMS, &disabled)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // healthy, and nothing to undo
		}
		if err != nil {
			return nil, fmt.Errorf("breaker of endpoint %d: %w", ep, err)
		}
		if failures == 0 {
			if _, err := tx.Exec(ctx, `UPDATE relay_endpoints SET failing_since = NULL, probe_delivery = NULL, probe_at = NULL, probes = 0
WHERE id = $1`, ep); err != nil {
				return nil, fmt.Errorf("close breaker of endpoint %d: %w", ep, err)
			}
			if err := r.releaseHeld(ctx, tx, ep, heldBreaker, time.Time{}); err != nil {
				return nil, err
			}
			continue
		}
		if lastFail.IsZero() {
			continue // a streak, but no failure in this round
		}
		if since == nil {
			since = &firstFail
		}
		if disableMS > 0 && !disabled && lastFail.Sub(*since) >= time.Duration(disableMS)*time.Millisecond {
			n, err := r.disableSustained(ctx, tx, ep, failures, time.Duration(disableMS)*time.Millisecond, moved, later)
			if err != nil {
				return nil, err
			}
			notes = append(notes, n)
			continue
		}
		if threshold == 0 || failures < threshold {
			if _, err := tx.Exec(ctx, `UPDATE relay_endpoints SET failing_since = $2 WHERE id = $1`, ep, *since); err != nil {
				return nil, fmt.Errorf("endpoint %d: failing since: %w", ep, err)
			}
			continue
		}
		// The breaker is open: one probe, the rest held.
		var valid bool
		if probe != nil {
			if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT state = 'pending' AND held IS NULL FROM relay_deliveries WHERE id = $1), false)`,
				*probe).Scan(&valid); err != nil {
				return nil, fmt.Errorf("endpoint %d: probe: %w", ep, err)
			}
			for _, s := range round {
				if s.d.id == *probe && kept[s.d.id] && s.a.outcome != "" {
					probeAttempted = true
					probeProtected = s.d.probe
					probeRetryAfter = s.a.at.Add(s.a.retryAfter)
				}
			}
		}
		if probeAttempted {
			probes++
		}
		var (
			newProbe int64
			ownDue   time.Time // a failure made the probe keeps its own due time (a Retry-After)
		)
		switch {
		case probeAttempted && valid:
			newProbe = *probe // failed and still pending: it probes again
		case valid && !probeAttempted:
			newProbe = 0 // the probe is elsewhere
		case len(failed) > 0:
			newProbe, ownDue = failed[0].d.id, failed[0].next
		}
		at := lastFail
		if w, ok := r.probeWait(probes + 1); ok {
			at = lastFail.Add(w)
		}
		if ownDue.After(at) {
			at = ownDue // never attempted before its own due time
		}
		if !probeAttempted && probeAt != nil && probeAt.After(at) {
			at = *probeAt
		}
		if probeRetryAfter.After(at) {
			at = probeRetryAfter // the receiver's Retry-After
		}
		hold := map[int64]bool{}
		for _, s := range failed {
			if s.d.id == newProbe {
				continue
			}
			hold[s.d.id] = true
			moved[s.d.id] = time.Time{}
			delete(later, s.d.id)
		}
		if err := holdRows(ctx, tx, hold, heldBreaker); err != nil {
			return nil, err
		}
		if newProbe != 0 {
			// A probe's failed attempt does not count against its own schedule: while the breaker is
			// open no delivery runs out of attempts (a sustained failure disables the endpoint instead).
			if _, err := tx.Exec(ctx, `UPDATE relay_deliveries SET next_attempt_at = $2,
    run_attempts = CASE WHEN $3 THEN greatest(run_attempts - 1, 0) ELSE run_attempts END WHERE id = $1`, newProbe, at,
				probeAttempted && probeProtected); err != nil {
				return nil, fmt.Errorf("endpoint %d: schedule probe: %w", ep, err)
			}
			moved[newProbe], later[newProbe] = at, at
		} else if !valid {
			// No probe in the round: the oldest held delivery becomes it, with a job due then — or at
			// its own due time (a Retry-After), if that is later.
			var id int64
			var due time.Time
			err := tx.QueryRow(ctx, `UPDATE relay_deliveries SET held = NULL, next_attempt_at = greatest($2, coalesce(next_attempt_at, $2))
WHERE id = (SELECT id FROM relay_deliveries WHERE endpoint_id = $1 AND held = 'breaker' AND state = 'pending' ORDER BY id LIMIT 1)
RETURNING id, next_attempt_at`, ep, at).Scan(&id, &due)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return nil, fmt.Errorf("endpoint %d: promote probe: %w", ep, err)
			default:
				newProbe, at = id, due
				if err := r.enqueue(ctx, tx, []int64{id}, at); err != nil {
					return nil, err
				}
			}
		}
		var probeArg, atArg any
		if newProbe != 0 {
			probeArg, atArg = newProbe, at
		} else if valid {
			probeArg, atArg = *probe, probeAt
		}
		if _, err := tx.Exec(ctx, `UPDATE relay_endpoints SET failing_since = $2, probe_delivery = $3, probe_at = $4, probes = $5
WHERE id = $1`, ep, *since, probeArg, atArg, probes); err != nil {
			return nil, fmt.Errorf("endpoint %d: breaker: %w", ep, err)
		}
	}
	return notes, nil
}

// probeWait is the wait before an open breaker's k-th probe: the schedule's k-th wait, its last one
// past its end.
func (r *Relay) probeWait(k int) (time.Duration, bool) {
	if len(r.schedule) < 2 {
		return 0, false
	}
	w, _ := r.wait(min(k, len(r.schedule)-1))
	return w, true
}

// disableSustained disables an endpoint that has failed for longer than its DisableAfter: its pending
// deliveries pause (events keep accruing as paused ones), and an alert says so.
func (r *Relay) disableSustained(ctx context.Context, tx pgx.Tx, ep int64, failures int, after time.Duration, moved, later map[int64]time.Time) (alertNote, error) {
	reason := fmt.Sprintf("%s %s: disabled by the relay after %d consecutive failures", SustainedFailureReason, after, failures)
	if _, err := tx.Exec(ctx, `UPDATE relay_endpoints SET disabled_at = coalesce(disabled_at, now()), disabled_reason = $2,
    auto_disabled = true, probe_delivery = NULL, probe_at = NULL WHERE id = $1`, ep, reason); err != nil {
		return alertNote{}, fmt.Errorf("disable endpoint %d: %w", ep, err)
	}
	ids, err := collectIDs(tx.Query(ctx, `UPDATE relay_deliveries SET state = 'paused', held = NULL, next_attempt_at = NULL
WHERE endpoint_id = $1 AND state = 'pending' RETURNING id`, ep))
	if err != nil {
		return alertNote{}, fmt.Errorf("pause deliveries of endpoint %d: %w", ep, err)
	}
	for _, id := range ids {
		moved[id] = time.Time{}
		delete(later, id)
	}
	n := alertNote{endpointID: ep, kind: AlertFailing, failures: failures, lastError: reason, disabled: true}
	if err := tx.QueryRow(ctx, `INSERT INTO relay_alerts (endpoint_id, kind, failures, error, disabled) VALUES ($1, $2, $3, '', true) RETURNING id`,
		ep, AlertFailing, failures).Scan(&n.id); err != nil {
		return alertNote{}, fmt.Errorf("insert alert: %w", err)
	}
	// The endpoints subscribed to operational events get it as endpoint.disabled with the alert's
	// webhook-id; the alert URL gets it by the alert's own job below.
	host, desc, err := endpointLabel(ctx, tx, ep)
	if err != nil {
		return alertNote{}, err
	}
	if err := r.RaiseOperational(ctx, tx, Operational{ID: alertWebhookID(n.id), Type: OpEndpointDisabled, EndpointID: ep,
		At: r.clock(), Text: disabledText(ep, host, failures), ExceptAlertURL: true,
		Data: map[string]any{"endpoint": ep, "url": host, "description": desc, "consecutive_failures": failures, "reason": reason}}); err != nil {
		return alertNote{}, err
	}
	if r.alerts.URL != "" {
		if _, err := r.inserter.InsertTx(ctx, tx, AlertArgs{AlertID: n.id}, &river.InsertOpts{Queue: Queue, MaxAttempts: alertJobAttempts,
			Priority: alertPriority}); err != nil {
			return alertNote{}, fmt.Errorf("insert alert job: %w", err)
		}
	}
	return n, nil
}

// skippedVersions returns the versions of a delivery's stream, below its own and above the last one
// the endpoint took, whose deliveries went dead: what an ordered endpoint's receiver never got.
func (r *Relay) skippedVersions(ctx context.Context, d delivery) ([]uint64, error) {
	rows, err := r.pool.Query(ctx, `SELECT stream_version FROM relay_deliveries
WHERE endpoint_id = $1 AND stream = $2 AND stream_version < $3 AND state = 'dead'
  AND stream_version > coalesce((SELECT max(stream_version) FROM relay_deliveries
      WHERE endpoint_id = $1 AND stream = $2 AND stream_version < $3 AND state = 'succeeded'), 0)
ORDER BY stream_version`, d.endpointID, d.stream, int64(d.version))
	if err != nil {
		return nil, fmt.Errorf("skipped versions: %w", err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("skipped versions: %w", err)
	}
	out := make([]uint64, len(vs))
	for i, v := range vs {
		out[i] = uint64(v)
	}
	return out, nil
}

// endpointLimits bounds each endpoint's attempts in flight in this instance (Settings.Concurrency).
type endpointLimits struct {
	mu   sync.Mutex
	sems map[string]chan struct{} // by endpoint id and limit
}

// acquire takes a slot of the endpoint's limit n, waiting until ctx is done; release gives it back.
func (l *endpointLimits) acquire(ctx context.Context, ep int64, n int) (release func(), err error) {
	if n <= 0 {
		return func() {}, nil
	}
	key := strconv.FormatInt(ep, 10) + "/" + strconv.Itoa(n)
	l.mu.Lock()
	if l.sems == nil {
		l.sems = map[string]chan struct{}{}
	}
	sem, ok := l.sems[key]
	if !ok {
		sem = make(chan struct{}, n)
		l.sems[key] = sem
	}
	l.mu.Unlock()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Backlog is what an endpoint has waiting.
type Backlog struct {
	// Pending counts the deliveries on their way, HeldOrder and HeldBreaker those of them held
	// (behind an earlier version; behind the open breaker); Paused those kept while disabled.
	Pending, HeldOrder, HeldBreaker, Paused int
	// OldestPending is when the oldest pending delivery was planned (zero: none).
	OldestPending time.Time
}

// EndpointBacklog returns what an endpoint has waiting.
func (r *Relay) EndpointBacklog(ctx context.Context, id int64) (Backlog, error) {
	var (
		b      Backlog
		oldest *time.Time
	)
	err := r.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE held = 'order'),
    count(*) FILTER (WHERE held = 'breaker'), count(*) FILTER (WHERE state = 'paused'), min(created_at) FILTER (WHERE state = 'pending')
FROM relay_deliveries WHERE endpoint_id = $1 AND state IN ('pending', 'paused')`, id).Scan(&b.Pending, &b.HeldOrder, &b.HeldBreaker, &b.Paused, &oldest)
	if err != nil {
		return Backlog{}, fmt.Errorf("backlog of endpoint %d: %w", id, err)
	}
	if oldest != nil {
		b.OldestPending = *oldest
	}
	return b, nil
}
