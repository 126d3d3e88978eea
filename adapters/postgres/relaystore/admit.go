package relaystore

import (
	"context"
	"fmt"
	"maps"
	"slices"
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

// RoundDelivery is what an attempt needs of a pending delivery and its endpoint (with the
// endpoint's settings and failure streak), and what AdmitRound decided of it.
type RoundDelivery struct {
	Pending
	// NotBefore is the throttle's send slot (zero: none).
	NotBefore time.Time
	// Probe: the attempt is the open breaker's probe; its failure does not count against the
	// delivery's schedule (projections/relay.AfterRound).
	Probe bool
}

// Gated reports whether a delivery passes AdmitRound's checks: its endpoint is ordered, throttled by
// rate or has an open breaker.
func (d RoundDelivery) Gated() bool {
	return d.Ordered || d.Rate > 0 || (d.BreakerFailures > 0 && d.Failures >= d.BreakerFailures)
}

// AdmitRound decides which of a round's deliveries go now, in one transaction. On an ordered endpoint
// a delivery whose booking has an earlier version pending or paused is held ('order') until that one
// ends; behind an open breaker every delivery but the one probe is held ('breaker') until a success
// closes it; under a rate each delivery takes the endpoint's next send slot (NotBefore) or, past
// window, gets a job due at its slot (deferred, recorded by Defer). A held delivery has no job:
// whoever ends its wait gives it one, in the transaction that ends it. Locks: the earlier versions
// (shared) before the endpoint row, as Record's callers take the deliveries' rows before the
// endpoint's. clock is read at each endpoint's admission.
func (s *Store) AdmitRound(ctx context.Context, ds []RoundDelivery, clock func() time.Time, window time.Duration) (send []RoundDelivery, deferred map[int64]time.Time, held map[int64]bool, err error) {
	if !slices.ContainsFunc(ds, RoundDelivery.Gated) {
		return ds, nil, nil, nil
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		send, deferred, held = nil, map[int64]time.Time{}, map[int64]bool{}
		var ordered []int64
		for _, d := range ds {
			if d.Ordered {
				ordered = append(ordered, d.ID)
			}
		}
		if len(ordered) > 0 {
			blocked, err := HoldOrdered(ctx, tx, ordered)
			if err != nil {
				return err
			}
			for _, id := range blocked {
				held[id] = true
			}
		}
		unheld := slices.DeleteFunc(slices.Clone(ds), func(d RoundDelivery) bool { return held[d.ID] })
		for _, group := range prelay.ByEndpoint(unheld, func(d RoundDelivery) int64 { return d.EndpointID }) {
			if d := group[0]; d.Rate <= 0 && (d.BreakerFailures == 0 || d.Failures < d.BreakerFailures) {
				send = append(send, group...)
				continue
			}
			ok, err := admitEndpoint(ctx, tx, group[0].EndpointID, group, clock(), window, deferred, held)
			if err != nil {
				return err
			}
			send = append(send, ok...)
		}
		ds := make([]Due, 0, len(deferred))
		for id, at := range deferred {
			ds = append(ds, Due{ID: id, At: at})
		}
		return Defer(ctx, tx, ds)
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("admit deliveries: %w", err)
	}
	return send, deferred, held, nil
}

// admitEndpoint applies an endpoint's breaker and rate to its deliveries of a round (id order), with
// the endpoint's row locked (Admit; projections/relay.Admit decides).
func admitEndpoint(ctx context.Context, tx pgx.Tx, ep int64, group []RoundDelivery, now time.Time, window time.Duration,
	deferred map[int64]time.Time, held map[int64]bool) ([]RoundDelivery, error) {
	byID := map[int64]RoundDelivery{}
	ids := make([]int64, len(group))
	for i, d := range group {
		ids[i], byID[d.ID] = d.ID, d
	}
	a, ok, err := Admit(ctx, tx, ep, ids, now, window)
	if err != nil || !ok {
		return nil, err // removed meanwhile: its deliveries are gone
	}
	for _, id := range a.Held {
		held[id] = true
	}
	maps.Copy(deferred, a.Deferred)
	send := make([]RoundDelivery, len(a.Send))
	for i, s := range a.Send {
		send[i] = byID[s.ID]
		send[i].NotBefore, send[i].Probe = s.NotBefore, s.Probe
	}
	return send, nil
}
