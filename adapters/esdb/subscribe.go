package esdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"bookingledger/domain/eventlog"
)

// handlerError carries the caller's error out of a subscription so that it ends Subscribe instead of
// causing a resubscription.
type handlerError struct {
	pos eventlog.Position
	err error
}

func (e *handlerError) Error() string { return fmt.Sprintf("handle event at %s: %v", e.pos, e.err) }
func (e *handlerError) Unwrap() error { return e.err }

// Subscribe calls handle for every selected event after from, in $all order: a catch-up subscription
// from that position (subscriptions to $all are live-only unless given one), then live events. The
// server filters by stream prefix. After a drop it resubscribes from the last handled position, with
// a doubling wait bounded by the resubscribe backoff, until ctx ends; events at or before the last
// handled position are skipped, so a server that replays its start event repeats nothing.
func (s *Store) Subscribe(ctx context.Context, from eventlog.Position, handle func(eventlog.RecordedEvent) error) error {
	opCtx, done, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer done()

	last := from
	wait := s.opts.backoffMin
	for {
		progressed, err := s.subscribeOnce(opCtx, &last, handle)
		var he *handlerError
		if errors.As(err, &he) {
			return fmt.Errorf("esdb subscription: %w", he)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if opCtx.Err() != nil {
			return ErrClosed
		}
		if progressed {
			wait = s.opts.backoffMin
		}
		if s.opts.logger != nil {
			s.opts.logger.Warn("esdb subscription dropped; resubscribing", "after", last.String(), "wait", wait, "err", err)
		}
		t := time.NewTimer(wait)
		select {
		case <-opCtx.Done():
			t.Stop()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return ErrClosed
		case <-t.C:
		}
		wait = min(2*wait, s.opts.backoffMax)
	}
}

// subscribeOnce runs one subscription until it drops, ctx ends or handle fails. It reports whether an
// event was handled, which resets the backoff.
func (s *Store) subscribeOnce(ctx context.Context, last *eventlog.Position, handle func(eventlog.RecordedEvent) error) (bool, error) {
	filter := esdb.ExcludeSystemEventsFilter()
	if len(s.opts.prefixes) > 0 {
		filter = &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: s.opts.prefixes}
	}
	// The subscription lives as long as this attempt: if the connect below is walked away from and
	// succeeds later, cancelling subCtx closes what it opened.
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := esdb.SubscribeToAllOptions{From: allPosition(*last), Filter: filter}
	sub, err := call(subCtx, s, func(c *esdb.Client) (*esdb.Subscription, error) {
		return c.SubscribeToAll(subCtx, opts)
	})
	if err != nil {
		return false, translate(ctx, err)
	}
	defer sub.Close()

	progressed := false
	for {
		ev := sub.Recv()
		switch {
		case ev.SubscriptionDropped != nil:
			return progressed, translate(ctx, ev.SubscriptionDropped.Error)
		case ev.EventAppeared != nil:
			if ev.EventAppeared.Event == nil {
				continue
			}
			rec := fromRecorded(ev.EventAppeared.Event)
			if rec.Position.Compare(*last) <= 0 {
				continue // the start event, or a replay after a resubscription
			}
			if !s.selected(rec.StreamID, rec.Type) {
				*last = rec.Position // nothing to hand over, but no need to read it again
				continue
			}
			if err := handle(rec); err != nil {
				return progressed, &handlerError{pos: rec.Position, err: err}
			}
			*last = rec.Position
			progressed = true
		}
		// Checkpoints only say how far the server's filter has looked. Resuming from one could skip a
		// matching event at exactly that position, so the resume point stays the last handled event.
	}
}
