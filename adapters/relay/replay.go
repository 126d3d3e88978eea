package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"bookingledger/adapters/postgres/relaystore"
	"bookingledger/domain/eventlog"
	prelay "bookingledger/projections/relay"
)

// ReplayQuery selects the deliveries of one endpoint whose events were recorded in [From, To)
// (projections/relay.ReplayQuery).
type ReplayQuery = prelay.ReplayQuery

// A replay's plan is projections/relay's: what it sends, counted one delivery at a time.
type (
	TypeCount   = prelay.TypeCount
	ReplayItem  = prelay.ReplayItem
	ReplayPlan  = prelay.ReplayPlan
	planBuilder = prelay.PlanBuilder
)

// eachBackfill calls fn with each page of the log's events a replay of q backfills for endpoint ep
// (relaystore.EachBackfill), read through the event-store port r.replayPage at a time.
func (r *Relay) eachBackfill(ctx context.Context, ep Endpoint, q ReplayQuery, fn func(relaystore.NewDeliveries) error) error {
	if r.events == nil {
		return errors.New("relay: a window replay reads the event log, and this relay has no event store")
	}
	readAll := func(from eventlog.Position, n int) ([]eventlog.RecordedEvent, error) {
		return r.events.ReadAll(ctx, from, n)
	}
	return relaystore.EachBackfill(ctx, readAll, r.replayPage, ep.ID, ep.Rule(), q, func() *prelay.Subjects { return r.newSubjects(ctx) }, fn)
}

// planBackfill adds to b the events a replay of q would backfill now.
func (r *Relay) planBackfill(ctx context.Context, ep Endpoint, q ReplayQuery, b *planBuilder) error {
	return r.eachBackfill(ctx, ep, q, func(news relaystore.NewDeliveries) error {
		items, err := r.store.Unplanned(ctx, ep.ID, news)
		for _, it := range items {
			b.Add(it)
		}
		return err
	})
}

// backfill inserts the deliveries of the events a replay of q backfills, as deliveries of replay rep
// with their jobs, and adds them to b, a page at a time (relaystore.Backfill: each page commits on
// its own, with the replay's total).
func (r *Relay) backfill(ctx context.Context, ep Endpoint, q ReplayQuery, rep int64, b *planBuilder, pace *prelay.Pacer) error {
	return r.eachBackfill(ctx, ep, q, func(news relaystore.NewDeliveries) error {
		items, err := r.store.Backfill(ctx, rep, news, func(tx pgx.Tx, ids []int64) error { return r.enqueueReplay(ctx, tx, pace, ids) })
		for _, it := range items {
			b.Add(it)
		}
		return err
	})
}

// PlanReplay answers a dry run: what StartReplay would send now.
func (r *Relay) PlanReplay(ctx context.Context, q ReplayQuery) (ReplayPlan, error) {
	if err := q.Check(); err != nil {
		return ReplayPlan{}, err
	}
	ep, err := r.Endpoint(ctx, q.EndpointID)
	if err != nil {
		return ReplayPlan{}, err
	}
	items, err := relaystore.SelectReplay(ctx, r.pool, q, ep.Rule(), r.newSubjects(ctx), false)
	if err != nil {
		return ReplayPlan{}, err
	}
	var b planBuilder
	for _, it := range items {
		b.Add(it)
	}
	if q.Backfills() {
		if err := r.planBackfill(ctx, ep, q, &b); err != nil {
			return ReplayPlan{}, err
		}
	}
	return b.Plan(q.RateOf(ep.RatePerSecond, r.replayRate)), nil
}

// StartReplay schedules the selected deliveries again as one tracked replay: same webhook-ids, a
// fresh run of the retry schedule, attempts marked with the replay. A window replay (not OnlyFailed)
// then creates and schedules, as part of the replay, the deliveries of the window's events that have
// none (the backfill), a page of the log at a time. It refuses a disabled endpoint.
func (r *Relay) StartReplay(ctx context.Context, q ReplayQuery) (Replay, ReplayPlan, error) {
	if err := q.Check(); err != nil {
		return Replay{}, ReplayPlan{}, err
	}
	e, err := r.Endpoint(ctx, q.EndpointID)
	if err != nil {
		return Replay{}, ReplayPlan{}, err
	}
	if e.Disabled {
		return Replay{}, ReplayPlan{}, fmt.Errorf("%w: endpoint %d is disabled; enable it first", ErrInvalid, e.ID)
	}
	var b planBuilder
	pace := &prelay.Pacer{Start: time.Now(), Rate: q.RateOf(e.RatePerSecond, r.replayRate)}
	rep, items, err := r.store.StartReplay(ctx, q, e.Rule(), r.newSubjects(ctx), pace.Rate, func(tx pgx.Tx, ids []int64) error {
		pace.N = 0
		return r.enqueueReplay(ctx, tx, pace, ids)
	})
	if err != nil {
		return Replay{}, ReplayPlan{}, fmt.Errorf("replay: %w", err)
	}
	for _, it := range items {
		b.Add(it)
	}
	// The deliveries that exist are on their way; the backfill follows, a page at a time.
	if q.Backfills() {
		if err := r.backfill(ctx, e, q, rep.ID, &b, pace); err != nil {
			return Replay{}, ReplayPlan{}, fmt.Errorf("replay %d: %w (what it scheduled so far is sent; replay the window again for the rest)", rep.ID, err)
		}
	}
	rep.EndpointID, rep.Total, rep.Pending = q.EndpointID, b.Total(), b.Total()
	return rep, b.Plan(pace.Rate), nil
}

// RetryDelivery sends one delivery again now, as a replay of that delivery alone (StartReplay's
// bookkeeping — same webhook-id, a fresh run of the schedule, attempts marked with the replay): a
// dead one, or a pending one waiting for a later attempt, whose waiting job is brought forward
// instead of a second one being inserted. ErrNotFound for an unknown delivery, ErrInvalid for one
// that cannot be retried (paused: its endpoint is disabled; succeeded: replay its window; pending and
// being attempted at this moment).
func (r *Relay) RetryDelivery(ctx context.Context, id int64) (Replay, error) {
	d, err := r.store.Delivery(ctx, id)
	if err != nil {
		return Replay{}, err
	}
	switch d.State {
	case StatePending:
		return r.retryPending(ctx, d)
	case StateDead:
	default:
		return Replay{}, fmt.Errorf("%w: delivery %d is %s; only a dead or a waiting pending delivery is retried", ErrInvalid, id, d.State)
	}
	rep, _, err := r.StartReplay(ctx, ReplayQuery{EndpointID: d.EndpointID, From: d.RecordedAt, To: d.RecordedAt.Add(time.Microsecond),
		OnlyFailed: true, DeliveryID: id})
	if err != nil {
		return Replay{}, err
	}
	if rep.Total == 0 {
		return rep, fmt.Errorf("%w: delivery %d is no longer dead (retried by someone else)", ErrInvalid, id)
	}
	return rep, nil
}

// retryPending makes a pending delivery's waiting job available now, as a replay of the delivery.
// A job that is running is left alone (it is attempting the delivery, or waits less than
// InlineWait): River moves only jobs that wait.
func (r *Relay) retryPending(ctx context.Context, d Delivery) (Replay, error) {
	var rep Replay
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		state, err := relaystore.LockState(ctx, tx, d.ID)
		if err != nil {
			return err
		}
		if state != StatePending {
			return fmt.Errorf("%w: delivery %d is %s now", ErrInvalid, d.ID, state)
		}
		one, _ := json.Marshal(map[string]int64{"delivery_id": d.ID})
		many, _ := json.Marshal(map[string][]int64{"delivery_ids": {d.ID}})
		waiting, err := r.inserter.JobListTx(ctx, tx, river.NewJobListParams().Kinds(DeliverArgs{}.Kind()).
			States(rivertype.JobStateScheduled, rivertype.JobStateRetryable, rivertype.JobStateAvailable).
			Where("args @> @one::jsonb OR args @> @many::jsonb", river.NamedArgs{"one": string(one), "many": string(many)}).First(1))
		if err != nil {
			return fmt.Errorf("find its job: %w", err)
		}
		if len(waiting.Jobs) == 0 {
			return fmt.Errorf("%w: delivery %d is being attempted now", ErrInvalid, d.ID)
		}
		if rep, err = relaystore.RetryAsReplay(ctx, tx, d); err != nil {
			return err
		}
		if _, err := r.inserter.JobRetryTx(ctx, tx, waiting.Jobs[0].ID); err != nil {
			return fmt.Errorf("bring its job forward: %w", err)
		}
		return nil
	})
	if err != nil {
		return Replay{}, fmt.Errorf("retry delivery %d: %w", d.ID, err)
	}
	rep.EndpointID, rep.Total, rep.Pending = d.EndpointID, 1, 1
	return rep, nil
}
