package esdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"bookingledger/domain/eventlog"
)

// claimNamespace derives the IDs of claim events: UUIDv5(namespace, "<event id> <stream>"), so that a
// retried claim is the same event and a claim for another stream is a different one.
const claimNamespace = "3b0f6c52-9a4e-5f1d-8c7a-2e6d1b4f9a30"

// ClaimEventType is the type of the event that binds an event ID to its stream.
const ClaimEventType = "bookingledger.event_id_claimed.v1"

// claim is the data of a claim event.
type claim struct {
	Stream string `json:"stream"`
}

// Append writes events to a stream if expected allows its version, and implements the port's
// idempotency itself rather than trusting the server's event-ID cache:
//
//  1. read the stream (booking streams are a handful of events);
//  2. every event ID already there, in order, at consecutive versions: Duplicate with the original
//     versions; some of them there: ErrPartialDuplicate;
//  3. check expected against the version read;
//  4. claim each event ID for this stream (a stream per ID, written with expected "no stream"), which
//     refuses an ID already stored in another stream;
//  5. append with an exact revision: the caller's for NoStream/Exact, the one just read for Any and
//     StreamExists, so that a concurrent copy of the same events cannot be written twice; if the stream
//     moved, go back to 1 (bounded).
func (s *Store) Append(ctx context.Context, stream string, expected eventlog.ExpectedVersion, events []eventlog.EventData) (eventlog.AppendResult, error) {
	if err := eventlog.Validate(stream, events); err != nil {
		return eventlog.AppendResult{}, err
	}
	ctx, done, err := s.begin(ctx)
	if err != nil {
		return eventlog.AppendResult{}, err
	}
	defer done()
	unlock, err := s.locks.lock(ctx, stream)
	if err != nil {
		return eventlog.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
	}
	defer unlock()

	claimed := false
	for attempt := 1; ; attempt++ {
		recs, err := s.readStream(ctx, stream)
		if err != nil {
			return eventlog.AppendResult{}, fmt.Errorf("append to %s: read: %w", stream, err)
		}
		if res, dup, err := matchStored(stream, recs, events); err != nil || dup {
			return res, err
		}
		version := uint64(len(recs))
		if !expected.Allows(version) {
			return eventlog.AppendResult{}, fmt.Errorf("append to %s: %w: stream is at version %d, expected %s",
				stream, eventlog.ErrVersionConflict, version, expected)
		}
		if !claimed {
			if err := s.claim(ctx, stream, events); err != nil {
				return eventlog.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
			}
			claimed = true
		}
		wr, err := s.write(ctx, stream, appendRevision(expected, version), events)
		if errors.Is(err, eventlog.ErrVersionConflict) {
			if attempt < s.opts.maxAttempts {
				continue // the stream moved after the read: read again, maybe it now holds these events
			}
			return eventlog.AppendResult{}, fmt.Errorf("append to %s with %s after %d attempts: %w", stream, expected, attempt, err)
		}
		if err != nil {
			return eventlog.AppendResult{}, fmt.Errorf("append to %s: %w", stream, err)
		}
		res := eventlog.AppendResult{FirstVersion: version + 1, LastVersion: version + uint64(len(events))}
		res.Position = s.positionOf(ctx, stream, version, events, wr)
		return res, nil
	}
}

// matchStored classifies events against a stream's stored events: all of them stored in order at
// consecutive versions is a duplicate (with the original versions), none is a new append, anything
// else is a partial duplicate.
func matchStored(stream string, recs []eventlog.RecordedEvent, events []eventlog.EventData) (eventlog.AppendResult, bool, error) {
	at := make(map[eventlog.EventID]int, len(recs))
	for i, r := range recs {
		at[r.ID] = i
	}
	found := 0
	for _, e := range events {
		if _, ok := at[e.ID]; ok {
			found++
		}
	}
	if found == 0 {
		return eventlog.AppendResult{}, false, nil
	}
	first := at[events[0].ID]
	if found == len(events) {
		consecutive := true
		for k, e := range events {
			if i, ok := at[e.ID]; !ok || i != first+k {
				consecutive = false
				break
			}
		}
		if consecutive {
			last := recs[first+len(events)-1]
			return eventlog.AppendResult{
				FirstVersion: recs[first].Version, LastVersion: last.Version, Position: last.Position, Duplicate: true,
			}, true, nil
		}
	}
	return eventlog.AppendResult{}, false, fmt.Errorf("append to %s: %w: %d of %d event IDs already stored, not as one earlier append",
		stream, eventlog.ErrPartialDuplicate, found, len(events))
}

// ExpectedRevision maps a port condition to the client's: Any → any, NoStream and Exact(0) → no
// stream, StreamExists → stream exists, Exact(n) → revision n-1 (port versions count events, server
// revisions number them from 0).
func ExpectedRevision(e eventlog.ExpectedVersion) esdb.ExpectedRevision {
	switch {
	case e.IsAny():
		return esdb.Any{}
	case e.IsNoStream():
		return esdb.NoStream{}
	case e.IsStreamExists():
		return esdb.StreamExists{}
	}
	v, _ := e.Exact()
	if v == 0 {
		return esdb.NoStream{}
	}
	return esdb.Revision(v - 1)
}

// appendRevision is the revision an append is sent with. Any and StreamExists have been checked
// against the version just read; sending that exact revision makes the server refuse a concurrent
// write instead of relying on its event-ID cache.
func appendRevision(e eventlog.ExpectedVersion, version uint64) esdb.ExpectedRevision {
	if e.IsAny() || e.IsStreamExists() {
		return ExpectedRevision(eventlog.Exact(version))
	}
	return ExpectedRevision(e)
}

func toEventData(e eventlog.EventData) esdb.EventData {
	return esdb.EventData{
		EventID:     uuid.UUID(e.ID), // never left nil: the client would invent a random ID
		EventType:   e.Type,
		ContentType: esdb.ContentTypeJson,
		Data:        e.Data,
		Metadata:    e.Metadata,
	}
}

func (s *Store) write(ctx context.Context, stream string, rev esdb.ExpectedRevision, events []eventlog.EventData) (*esdb.WriteResult, error) {
	data := make([]esdb.EventData, len(events))
	for i, e := range events {
		data[i] = toEventData(e)
	}
	wr, err := call(ctx, s, func(c *esdb.Client) (*esdb.WriteResult, error) {
		return c.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: rev}, data...)
	})
	return wr, translate(ctx, err)
}

// positionOf reads back the appended events for their $all position: the write result's position is
// the server's commit record, which servers have not always reported as the last event's position.
// If the read fails, the append still happened, so the write result's position is the answer.
func (s *Store) positionOf(ctx context.Context, stream string, version uint64, events []eventlog.EventData, wr *esdb.WriteResult) eventlog.Position {
	recs, err := s.readRange(ctx, stream, version, uint64(len(events)))
	if err == nil && len(recs) == len(events) && recs[len(recs)-1].ID == events[len(events)-1].ID {
		return recs[len(recs)-1].Position
	}
	return eventlog.Position{Commit: wr.CommitPosition, Prepare: wr.PreparePosition}
}

// claim binds each event ID to stream, once and for all: EventStoreDB has no index of event IDs
// across streams, and the port must refuse an ID that another stream already holds.
func (s *Store) claim(ctx context.Context, stream string, events []eventlog.EventData) error {
	data, err := json.Marshal(claim{Stream: stream})
	if err != nil {
		return fmt.Errorf("encode claim: %w", err)
	}
	for _, e := range events {
		name := ClaimStreamPrefix + e.ID.String()
		ev := esdb.EventData{
			EventID:     claimEventID(e.ID, stream),
			EventType:   ClaimEventType,
			ContentType: esdb.ContentTypeJson,
			Data:        data,
		}
		_, err := s.claimWrite(ctx, name, ev)
		if err == nil {
			continue // claimed now, or claimed for this stream by an earlier attempt (idempotent)
		}
		if !errors.Is(err, eventlog.ErrVersionConflict) {
			return fmt.Errorf("claim event %s: %w", e.ID, err)
		}
		owner, err := s.claimOwner(ctx, name)
		if err != nil {
			return fmt.Errorf("claim event %s: %w", e.ID, err)
		}
		if owner != stream {
			return fmt.Errorf("%w: event %s is stored in another stream", eventlog.ErrPartialDuplicate, e.ID)
		}
	}
	return nil
}

func (s *Store) claimWrite(ctx context.Context, name string, ev esdb.EventData) (*esdb.WriteResult, error) {
	wr, err := call(ctx, s, func(c *esdb.Client) (*esdb.WriteResult, error) {
		return c.AppendToStream(ctx, name, esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, ev)
	})
	return wr, translate(ctx, err)
}

// claimOwner returns the stream named by the first event of a claim stream.
func (s *Store) claimOwner(ctx context.Context, name string) (string, error) {
	recs, err := s.readRange(ctx, name, 0, 1)
	if err != nil {
		return "", err
	}
	if len(recs) == 0 {
		return "", fmt.Errorf("%w: claim stream %s refused a first write but is empty", eventlog.ErrVersionConflict, name)
	}
	var c claim
	if err := json.Unmarshal(recs[0].Data, &c); err != nil {
		return "", fmt.Errorf("decode claim %s: %w", name, err)
	}
	return c.Stream, nil
}

// claimEventID is the ID of the claim of event id by stream (claimNamespace).
func claimEventID(id eventlog.EventID, stream string) uuid.UUID {
	return eventlog.UUIDv5(uuid.MustParse(claimNamespace), []byte(id.String()+" "+stream))
}
