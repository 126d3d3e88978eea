package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"bookingledger/adapters/postgres/relaystore"
	"bookingledger/domain/eventlog"
	prelay "bookingledger/projections/relay"
)

// newSubjects returns what filters look at in one batch's events (projections/relay.Subjects), its
// streams read from the event log.
func (r *Relay) newSubjects(ctx context.Context) *prelay.Subjects {
	var read prelay.ReadStream
	if r.events != nil {
		read = func(stream string) ([]eventlog.RecordedEvent, error) { return r.events.ReadStream(ctx, stream) }
	}
	return prelay.NewSubjects(read, r.codec)
}

// plan inserts the deliveries of events: one per endpoint that takes the event under the rule in
// force when it was recorded (projections/relay.Plan; earlier events reach a new endpoint by
// replay), paused for a disabled endpoint. The unique (endpoint, event) key makes a second planning
// of the same event a no-op.
// unsubscribed reports that no endpoint exists, so that a batch plans nothing: the projection's
// idle batches (checkpoint.Config.Idle) only move its checkpoint. An endpoint created later takes
// the events recorded from then on (the rule in force when an event was recorded), none of an idle
// batch's.
func (r *Relay) unsubscribed(ctx context.Context) (bool, error) {
	exists, err := relaystore.AnyEndpoint(ctx, r.pool)
	return !exists, err
}

func (r *Relay) plan(ctx context.Context, tx pgx.Tx, events []eventlog.RecordedEvent) error {
	eps, err := relaystore.FanoutEndpoints(ctx, tx)
	if err != nil {
		return fmt.Errorf("relay plan: %w", err)
	}
	if len(eps) == 0 {
		return nil
	}
	subs := r.newSubjects(ctx)
	var news relaystore.NewDeliveries
	for _, p := range prelay.Plan(eps, events, subs.Of) {
		news.Add(p.Endpoint, p.Event, p.Booking, p.State)
	}
	if subs.Err() != nil {
		// A filter that cannot be evaluated must not drop events: the batch is retried.
		return fmt.Errorf("relay plan: filter: %w", subs.Err())
	}
	if news.Len() == 0 {
		return nil
	}
	var pending []relaystore.Inserted
	err = news.Insert(ctx, tx, 0, func(d relaystore.Inserted) {
		if d.State == StatePending {
			pending = append(pending, d)
		}
	})
	if err != nil {
		return fmt.Errorf("relay plan: %w", err)
	}
	var params []river.InsertManyParams
	for _, group := range prelay.ByEndpoint(pending, func(d relaystore.Inserted) int64 { return d.Endpoint }) {
		ids := make([]int64, len(group))
		for i, d := range group {
			ids[i] = d.ID
		}
		params = jobParams(params, ids, time.Time{})
	}
	return r.insertJobs(ctx, tx, params)
}
