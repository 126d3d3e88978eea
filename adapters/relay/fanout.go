package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"bookingledger/adapters/postgres/relaystore"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/resource"
	prelay "bookingledger/projections/relay"
)

// subjects computes what filters look at in events: each booking's state after the event (its
// stream read once and folded up to the event) and the calendar's links as they are now. Good for
// one batch: it caches what it read.
type subjects struct {
	events  eventlog.Store
	codec   Decoder
	streams map[string][]booking.Event
	links   *resource.State
	// err is the first error; a subject that cannot be computed matches no filter.
	err error
}

func (r *Relay) newSubjects() *subjects {
	return &subjects{events: r.events, codec: r.codec, streams: map[string][]booking.Event{}}
}

// of returns the subject of the event at version of stream (a link event's when the stream is the
// link stream).
func (s *subjects) of(ctx context.Context, stream string, version uint64) prelay.Subject {
	sub, err := s.compute(ctx, stream, version)
	if err != nil && s.err == nil {
		s.err = err
	}
	return sub
}

func (s *subjects) compute(ctx context.Context, stream string, version uint64) (prelay.Subject, error) {
	if s.events == nil || s.codec == nil {
		return prelay.Subject{}, errors.New("relay: filters read the event log, and this relay has no event store or codec")
	}
	if stream == resource.Stream {
		recs, err := s.events.ReadStream(ctx, stream)
		if err != nil || version == 0 || uint64(len(recs)) < version {
			return prelay.Subject{}, fmt.Errorf("read %s@%d: %w", stream, version, err)
		}
		e, err := s.codec.DecodeResource(recs[version-1])
		if err != nil {
			return prelay.Subject{}, fmt.Errorf("decode %s@%d: %w", stream, version, err)
		}
		return prelay.LinkSubject(e), nil
	}
	events, ok := s.streams[stream]
	if !ok || uint64(len(events)) < version {
		recs, err := s.events.ReadStream(ctx, stream)
		if err != nil {
			return prelay.Subject{}, fmt.Errorf("read %s: %w", stream, err)
		}
		if events, err = decodeAll(recs, s.codec.Decode); err != nil {
			return prelay.Subject{}, err
		}
		s.streams[stream] = events
	}
	if version == 0 || uint64(len(events)) < version {
		return prelay.Subject{}, fmt.Errorf("%s has %d events, not version %d", stream, len(events), version)
	}
	if s.links == nil {
		recs, err := s.events.ReadStream(ctx, resource.Stream)
		if err != nil {
			return prelay.Subject{}, fmt.Errorf("read %s: %w", resource.Stream, err)
		}
		links, err := decodeAll(recs, s.codec.DecodeResource)
		if err != nil {
			return prelay.Subject{}, err
		}
		var st resource.State
		for _, e := range links {
			st.Evolve(e)
		}
		s.links = &st
	}
	return prelay.BookingSubject(booking.Fold(events[:version]), *s.links), nil
}

// plan inserts the deliveries of events: one per endpoint that takes the event under the rule in
// force when it was recorded (projections/relay.FanOut; earlier events reach a new endpoint by
// replay), paused for a disabled endpoint. The unique (endpoint, event) key makes a second planning
// of the same event a no-op.
func (r *Relay) plan(ctx context.Context, tx pgx.Tx, events []eventlog.RecordedEvent) error {
	eps, err := relaystore.FanoutEndpoints(ctx, tx)
	if err != nil {
		return fmt.Errorf("relay plan: %w", err)
	}
	if len(eps) == 0 {
		return nil
	}
	subs := r.newSubjects()
	var news relaystore.NewDeliveries
	for _, ev := range events {
		b, ok := prelay.Relayable(ev.StreamID)
		if !ok {
			continue
		}
		for _, ep := range prelay.FanOut(eps, prelay.Event{Type: ev.Type, RecordedAt: ev.RecordedAt},
			func() prelay.Subject { return subs.of(ctx, ev.StreamID, ev.Version) }) {
			state := StatePending
			if ep.Disabled {
				state = StatePaused
			}
			news.Add(ep.ID, ev, b, state)
		}
	}
	if subs.err != nil {
		// A filter that cannot be evaluated must not drop events: the batch is retried.
		return fmt.Errorf("relay plan: filter: %w", subs.err)
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
