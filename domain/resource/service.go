package resource

import (
	"context"
	"errors"
	"fmt"
	"time"

	"bookingledger/domain/eventlog"
)

// Codec translates link events to stored events and back; adapters own the wire format.
type Codec interface {
	EncodeResource(Event) (eventlog.EventData, error)
	DecodeResource(eventlog.RecordedEvent) (Event, error)
}

// Service records links on the event store.
type Service struct {
	store eventlog.Store
	codec Codec
}

// NewService returns a service appending to store.
func NewService(store eventlog.Store, codec Codec) *Service {
	return &Service{store: store, codec: codec}
}

// maxAttempts bounds the reload-and-decide loop when another process appended meanwhile.
const maxAttempts = 8

// Load reads and folds the link stream; it also returns the events, oldest first.
func (s *Service) Load(ctx context.Context) (State, []Event, error) {
	recs, err := s.store.ReadStream(ctx, Stream)
	if err != nil {
		return State{}, nil, fmt.Errorf("read %s: %w", Stream, err)
	}
	evs := make([]Event, 0, len(recs))
	for _, rec := range recs {
		e, err := s.codec.DecodeResource(rec)
		if err != nil {
			return State{}, nil, fmt.Errorf("decode %s@%d: %w", Stream, rec.Version, err)
		}
		evs = append(evs, e)
	}
	st := Fold(evs)
	if n := len(recs); n > 0 {
		st.Version = recs[n-1].Version
	}
	return st, evs, nil
}

// Link links ids to name on behalf of by and returns the event appended (nil: all linked already).
func (s *Service) Link(ctx context.Context, name string, ids []string, by string, at time.Time) ([]Event, error) {
	return s.decide(ctx, by, at, func(st State) ([]Change, error) {
		c, err := Link(st, name, ids)
		if c == nil {
			return nil, err
		}
		return []Change{*c}, err
	})
}

// Unlink takes ids (none: all) from name and returns the event appended.
func (s *Service) Unlink(ctx context.Context, name string, ids []string, by string, at time.Time) ([]Event, error) {
	return s.decide(ctx, by, at, func(st State) ([]Change, error) {
		c, err := Unlink(st, name, ids)
		if c == nil {
			return nil, err
		}
		return []Change{*c}, err
	})
}

// Apply makes the names of desired own exactly their identifiers (see Plan) and returns the events
// appended; none when the stream says so already.
func (s *Service) Apply(ctx context.Context, desired map[string][]string, by string, at time.Time) ([]Event, error) {
	return s.decide(ctx, by, at, func(st State) ([]Change, error) { return Plan(st, desired) })
}

func (s *Service) decide(ctx context.Context, by string, at time.Time, plan func(State) ([]Change, error)) ([]Event, error) {
	if by == "" {
		return nil, fmt.Errorf("%w: who makes the change must be named", ErrInvalid)
	}
	for attempt := 1; ; attempt++ {
		st, _, err := s.Load(ctx)
		if err != nil {
			return nil, err
		}
		changes, err := plan(st)
		if err != nil || len(changes) == 0 {
			return nil, err
		}
		evs := make([]Event, len(changes))
		data := make([]eventlog.EventData, len(changes))
		for i, c := range changes {
			evs[i] = Event{ID: EventID(st.Version+uint64(i), c), Type: c.Type, Name: c.Name, Resources: c.Resources, By: by, At: at.UTC()}
			if data[i], err = s.codec.EncodeResource(evs[i]); err != nil {
				return nil, fmt.Errorf("encode %s: %w", c.Type, err)
			}
		}
		_, err = s.store.Append(ctx, Stream, eventlog.Exact(st.Version), data)
		if errors.Is(err, eventlog.ErrVersionConflict) && attempt < maxAttempts {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("append to %s: %w", Stream, err)
		}
		return evs, nil
	}
}
