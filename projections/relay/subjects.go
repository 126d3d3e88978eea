package relay

import (
	"errors"
	"fmt"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/resource"
)

// Decoder turns stored events into domain events (adapters/eventcodec.JSON): booking events and the
// calendar's link events.
type Decoder interface {
	Decode(r eventlog.RecordedEvent) (booking.Event, error)
	DecodeResource(r eventlog.RecordedEvent) (resource.Event, error)
}

// ReadStream reads a whole stream of the event log (the adapter's event store, its context bound).
type ReadStream func(stream string) ([]eventlog.RecordedEvent, error)

// Subjects computes what filters look at in events: each booking's state after the event (its
// stream read once and folded up to the event) and the calendar's links as they are now. Good for
// one batch: it caches what it read.
type Subjects struct {
	read    ReadStream
	codec   Decoder
	streams map[string][]booking.Event
	links   *resource.State
	// err is the first error; a subject that cannot be computed matches no filter.
	err error
}

// NewSubjects returns the subjects of one batch, read with read and decoded with codec (either nil:
// every subject is an error).
func NewSubjects(read ReadStream, codec Decoder) *Subjects {
	return &Subjects{read: read, codec: codec, streams: map[string][]booking.Event{}}
}

// Err is the first error a subject met; a filter it was asked for matched nothing.
func (s *Subjects) Err() error { return s.err }

// Of returns the subject of the event at version of stream (a link event's when the stream is the
// link stream).
func (s *Subjects) Of(stream string, version uint64) Subject {
	sub, err := s.compute(stream, version)
	if err != nil && s.err == nil {
		s.err = err
	}
	return sub
}

func (s *Subjects) compute(stream string, version uint64) (Subject, error) {
	if s.read == nil || s.codec == nil {
		return Subject{}, errors.New("relay: filters read the event log, and this relay has no event store or codec")
	}
	if stream == resource.Stream {
		recs, err := s.read(stream)
		if err != nil || version == 0 || uint64(len(recs)) < version {
			return Subject{}, fmt.Errorf("read %s@%d: %w", stream, version, err)
		}
		e, err := s.codec.DecodeResource(recs[version-1])
		if err != nil {
			return Subject{}, fmt.Errorf("decode %s@%d: %w", stream, version, err)
		}
		return LinkSubject(e), nil
	}
	events, ok := s.streams[stream]
	if !ok || uint64(len(events)) < version {
		recs, err := s.read(stream)
		if err != nil {
			return Subject{}, fmt.Errorf("read %s: %w", stream, err)
		}
		if events, err = DecodeAll(recs, s.codec.Decode); err != nil {
			return Subject{}, err
		}
		s.streams[stream] = events
	}
	if version == 0 || uint64(len(events)) < version {
		return Subject{}, fmt.Errorf("%s has %d events, not version %d", stream, len(events), version)
	}
	if s.links == nil {
		recs, err := s.read(resource.Stream)
		if err != nil {
			return Subject{}, fmt.Errorf("read %s: %w", resource.Stream, err)
		}
		links, err := DecodeAll(recs, s.codec.DecodeResource)
		if err != nil {
			return Subject{}, err
		}
		var st resource.State
		for _, e := range links {
			st.Evolve(e)
		}
		s.links = &st
	}
	return BookingSubject(booking.Fold(events[:version]), *s.links), nil
}

// StreamMessage is the message of the event at version of a stream whose records are recs (read
// whole), and that event's record: the stream folded up to it (BookingMessage, LinkMessage). The
// stream's prefix never changes, so neither does the message.
func StreamMessage(recs []eventlog.RecordedEvent, stream string, version uint64, codec Decoder) (Message, eventlog.RecordedEvent, error) {
	if version == 0 || uint64(len(recs)) < version {
		return Message{}, eventlog.RecordedEvent{}, fmt.Errorf("%s has %d events, not version %d", stream, len(recs), version)
	}
	recs = recs[:version]
	var m Message
	if stream == resource.Stream {
		events, err := DecodeAll(recs, codec.DecodeResource)
		if err != nil {
			return Message{}, eventlog.RecordedEvent{}, err
		}
		m = LinkMessage(recs, events)
	} else {
		events, err := DecodeAll(recs, codec.Decode)
		if err != nil {
			return Message{}, eventlog.RecordedEvent{}, err
		}
		m = BookingMessage(recs, events)
	}
	return m, recs[version-1], nil
}

// DecodeAll decodes recs with decode: a Decoder's Decode (a booking's) or DecodeResource (links).
func DecodeAll[E any](recs []eventlog.RecordedEvent, decode func(eventlog.RecordedEvent) (E, error)) ([]E, error) {
	out := make([]E, 0, len(recs))
	for _, rec := range recs {
		e, err := decode(rec)
		if err != nil {
			return nil, fmt.Errorf("decode %s@%d: %w", rec.StreamID, rec.Version, err)
		}
		out = append(out, e)
	}
	return out, nil
}
