package relay

import (
	"bookingledger/adapters/postgres/relaystore"
	prelay "bookingledger/projections/relay"
	"context"
	"fmt"
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
	MaxRate            = relaystore.MaxRate
	MaxConcurrency     = relaystore.MaxConcurrency
	MaxBreakerFailures = relaystore.MaxBreakerFailures
	// throttleWindow is how far ahead of now a round takes its endpoint's send slots; a delivery whose
	// slot is later gets a job due then.
	throttleWindow = time.Second
)

// Reasons the relay holds a pending delivery without a job (relay_deliveries.held).
const (
	heldOrder   = relaystore.HeldOrder
	heldBreaker = relaystore.HeldBreaker
)

// SustainedFailureReason starts the disabled reason of an endpoint the relay disabled after a
// sustained failure.
const SustainedFailureReason = prelay.SustainedFailureReason

// settingsChanged gives a job to the deliveries an endpoint's new settings no longer hold.
func (r *Relay) settingsChanged(ctx context.Context, tx pgx.Tx, e Endpoint) error {
	if !e.Ordered {
		if err := r.releaseHeld(ctx, tx, e.ID, heldOrder); err != nil {
			return err
		}
	}
	if !e.BreakerOpen() {
		return r.releaseHeld(ctx, tx, e.ID, heldBreaker)
	}
	return nil
}

// releaseHeld gives each delivery of the endpoint held for why a job: due now, or at its own later
// due time (a Retry-After).
func (r *Relay) releaseHeld(ctx context.Context, tx pgx.Tx, endpointID int64, why string) error {
	ds, err := relaystore.ReleaseHeld(ctx, tx, endpointID, why, time.Time{})
	if err != nil {
		return err
	}
	slices.SortFunc(ds, func(a, b relaystore.Due) int { return int(a.ID - b.ID) })
	now := r.clock()
	var nowIDs []int64
	var params []river.InsertManyParams
	for _, d := range ds {
		if d.At.After(now) {
			params = jobParams(params, []int64{d.ID}, d.At)
		} else {
			nowIDs = append(nowIDs, d.ID)
		}
	}
	return r.insertJobs(ctx, tx, jobParams(params, nowIDs, time.Time{}))
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
		var ids []int64
		var err error
		if e, ids, err = relaystore.Enable(ctx, tx, id, sendMissed, SkippedOnEnable); err != nil {
			return err
		}
		n = len(ids)
		return r.enqueue(ctx, tx, ids, time.Time{})
	})
	if err != nil {
		return Endpoint{}, 0, fmt.Errorf("enable endpoint %d: %w", id, err)
	}
	return e, n, nil
}

// releaseOrder gives the next held version of each booking whose delivery the round ended (succeeded
// or dead) a job, in the round's transaction; the round's admission holds it again if an earlier
// version is still pending.
func (r *Relay) releaseOrder(ctx context.Context, tx pgx.Tx, round []sent, kept map[int64]bool) error {
	var eps []int64
	var streams []string
	for _, s := range round {
		if kept[s.d.ID] && s.d.Ordered && (s.state == StateSucceeded || s.state == StateDead) {
			eps, streams = append(eps, s.d.EndpointID), append(streams, s.d.Stream)
		}
	}
	if len(eps) == 0 {
		return nil
	}
	released, err := relaystore.ReleaseNextVersions(ctx, tx, eps, streams)
	if err != nil {
		return err
	}
	var params []river.InsertManyParams
	for _, group := range prelay.ByEndpoint(released, func(rel relaystore.Released) int64 { return rel.Endpoint }) {
		ids := make([]int64, len(group))
		for i, rel := range group {
			ids[i] = rel.ID
		}
		slices.Sort(ids)
		params = jobParams(params, ids, time.Time{})
	}
	return r.insertJobs(ctx, tx, params)
}

// afterRound applies a round's attempts to the breakers of its endpoints, after their streaks were
// counted (projections/relay.AfterRound decides): an endpoint whose streak ended releases what its
// breaker held; one whose streak reached its breaker's threshold keeps one probe and holds the
// round's other failures; one failing for longer than its DisableAfter is disabled, its pending
// deliveries paused, with an alert. moved gets the round's deliveries whose next attempt it changed
// (zero: held or paused, no job), and later is updated to match.
func (r *Relay) afterRound(ctx context.Context, tx pgx.Tx, round []sent, kept map[int64]bool, later, moved map[int64]time.Time) ([]alertNote, error) {
	byEP := map[int64][]prelay.RoundAttempt{}
	var eps []int64
	for _, s := range round {
		if !kept[s.d.ID] {
			continue
		}
		if !slices.Contains(eps, s.d.EndpointID) {
			eps = append(eps, s.d.EndpointID)
		}
		if s.a.Outcome != "" {
			byEP[s.d.EndpointID] = append(byEP[s.d.EndpointID], prelay.RoundAttempt{ID: s.d.ID, Failed: s.a.Outcome == OutcomeFailed,
				End: s.a.At.Add(s.a.Latency), RetryAfter: s.a.At.Add(s.a.RetryAfter), Pending: s.state == StatePending, Next: s.next,
				Protected: s.d.Probe})
		}
	}
	slices.Sort(eps)
	var notes []alertNote
	for _, ep := range eps {
		b, ok, err := relaystore.LoadBreaker(ctx, tx, ep)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // healthy, and nothing to undo
		}
		step := prelay.AfterRound(b, byEP[ep], r.schedule)
		switch step.Do {
		case prelay.CloseBreaker:
			if err := relaystore.CloseBreaker(ctx, tx, ep); err != nil {
				return nil, err
			}
			if err := r.releaseHeld(ctx, tx, ep, heldBreaker); err != nil {
				return nil, err
			}
		case prelay.DisableEndpoint:
			n, err := r.disableSustained(ctx, tx, ep, b.Failures, b.DisableAfter, moved, later)
			if err != nil {
				return nil, err
			}
			notes = append(notes, n)
		case prelay.CountStreak:
			if err := relaystore.SetFailingSince(ctx, tx, ep, step.Since); err != nil {
				return nil, err
			}
		case prelay.OpenBreaker:
			if err := r.openBreaker(ctx, tx, ep, b, step, later, moved); err != nil {
				return nil, err
			}
		}
	}
	return notes, nil
}

// openBreaker records an open breaker's step (relaystore.OpenBreaker): its held failures leave the
// job, its probe goes when the step says — a promoted one by a job of its own.
func (r *Relay) openBreaker(ctx context.Context, tx pgx.Tx, ep int64, b prelay.Breaker, step prelay.BreakerStep, later, moved map[int64]time.Time) error {
	for _, id := range step.Hold {
		moved[id] = time.Time{}
		delete(later, id)
	}
	probe, at, promoted, err := relaystore.OpenBreaker(ctx, tx, ep, b, step)
	switch {
	case err != nil:
		return err
	case promoted:
		return r.enqueue(ctx, tx, []int64{probe}, at)
	case step.Probe != 0:
		moved[probe], later[probe] = at, at
	}
	return nil
}

// disableSustained disables an endpoint that has failed for longer than its DisableAfter: its pending
// deliveries pause (events keep accruing as paused ones), and an alert says so.
func (r *Relay) disableSustained(ctx context.Context, tx pgx.Tx, ep int64, failures int, after time.Duration, moved, later map[int64]time.Time) (alertNote, error) {
	reason := prelay.SustainedReason(after, failures)
	ids, err := relaystore.DisableSustained(ctx, tx, ep, reason)
	if err != nil {
		return alertNote{}, err
	}
	for _, id := range ids {
		moved[id] = time.Time{}
		delete(later, id)
	}
	n := alertNote{endpointID: ep, kind: AlertFailing, failures: failures, lastError: reason, disabled: true}
	if n.id, _, err = relaystore.InsertAlert(ctx, tx, ep, AlertFailing, failures, true); err != nil {
		return alertNote{}, err
	}
	// The endpoints subscribed to operational events get it as endpoint.disabled with the alert's
	// webhook-id; the alert URL gets it by the alert's own job below.
	host, desc, err := endpointLabel(ctx, tx, ep)
	if err != nil {
		return alertNote{}, err
	}
	if err := r.RaiseOperational(ctx, tx, prelay.SustainedDisable(n.id, ep, host, desc, failures, reason, r.clock())); err != nil {
		return alertNote{}, err
	}
	return n, r.sendAlert(ctx, tx, n.id)
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
