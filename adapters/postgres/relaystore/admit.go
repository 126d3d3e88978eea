package relaystore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	prelay "bookingledger/projections/relay"
)

// HoldOrdered holds ('order') those of ids, deliveries to ordered endpoints, whose booking has an
// earlier version pending or paused (OrderBlocked, which locks those first), and returns them.
func HoldOrdered(ctx context.Context, tx pgx.Tx, ids []int64) ([]int64, error) {
	blocked, err := OrderBlocked(ctx, tx, ids)
	if err != nil {
		return nil, err
	}
	return blocked, Hold(ctx, tx, blocked, HeldOrder)
}

// Admit applies an endpoint's breaker and rate to its deliveries ids of a round (id order) at now,
// with the endpoint's row locked (projections/relay.Admit decides), and records the admission: the
// deliveries it holds ('breaker'), its new probe and the throttle's next slot. False when the
// endpoint was removed meanwhile (its deliveries are gone).
func Admit(ctx context.Context, tx pgx.Tx, ep int64, ids []int64, now time.Time, window time.Duration) (prelay.Admission, bool, error) {
	g, ok, err := LoadGate(ctx, tx, ep)
	if err != nil || !ok {
		return prelay.Admission{}, false, err
	}
	a := prelay.Admit(g, ids, now, window)
	if err := Hold(ctx, tx, a.Held, HeldBreaker); err != nil {
		return prelay.Admission{}, false, err
	}
	if a.NewProbe != 0 {
		if err := SetProbe(ctx, tx, ep, a.NewProbe); err != nil {
			return prelay.Admission{}, false, err
		}
	}
	if a.Throttled {
		if err := SetThrottle(ctx, tx, ep, a.NextSlot); err != nil {
			return prelay.Admission{}, false, err
		}
	}
	return a, true, nil
}

// OpenBreaker records an open breaker's step (projections/relay.AfterRound) of endpoint ep, whose
// breaker was b: it holds the round's other failures, schedules the probe — or, with none in the
// round, promotes the oldest held delivery — and records the breaker. It returns the probe and when
// it goes (0: none), promoted when the probe was a held delivery, which needs a job.
func OpenBreaker(ctx context.Context, tx pgx.Tx, ep int64, b prelay.Breaker, step prelay.BreakerStep) (probe int64, at time.Time, promoted bool, err error) {
	if err := Hold(ctx, tx, step.Hold, HeldBreaker); err != nil {
		return 0, time.Time{}, false, err
	}
	probe, at = step.Probe, step.At
	switch {
	case probe != 0:
		// A probe's failed attempt does not count against its own schedule: while the breaker is open
		// no delivery runs out of attempts (a sustained failure disables the endpoint instead).
		if err := ScheduleProbe(ctx, tx, probe, at, step.Protect); err != nil {
			return 0, time.Time{}, false, fmt.Errorf("endpoint %d: schedule probe: %w", ep, err)
		}
	case step.Promote:
		// No probe in the round: the oldest held delivery becomes it, due then — or at its own due
		// time (a Retry-After), if that is later.
		d, ok, err := PromoteProbe(ctx, tx, ep, at)
		if err != nil {
			return 0, time.Time{}, false, fmt.Errorf("endpoint %d: promote probe: %w", ep, err)
		}
		probe, at, promoted = d.ID, d.At, ok
	}
	recorded, recordedAt := probe, at
	switch {
	case probe != 0:
	case step.KeepProbe:
		recorded, recordedAt = b.Probe, b.ProbeAt
	default:
		recordedAt = time.Time{}
	}
	return probe, at, promoted, SetBreaker(ctx, tx, ep, step.Since, recorded, recordedAt, step.Probes)
}
