package esdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"bookingledger/domain/eventlog"
)

// readBatch is how many events one read RPC asks for. Booking streams fit in one.
const readBatch = 512

// ReadStream returns a stream's events in version order; a missing stream is empty.
func (s *Store) ReadStream(ctx context.Context, stream string) ([]eventlog.RecordedEvent, error) {
	ctx, done, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	recs, err := s.readStream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stream, err)
	}
	return recs, nil
}

// readStream reads a whole stream in batches.
func (s *Store) readStream(ctx context.Context, stream string) ([]eventlog.RecordedEvent, error) {
	var out []eventlog.RecordedEvent
	for {
		batch, err := s.readRange(ctx, stream, uint64(len(out)), readBatch)
		if err != nil {
			return nil, err
		}
		out = append(out, batch...)
		if len(batch) < readBatch {
			return out, nil
		}
	}
}

// readRange reads up to count events of a stream from a 0-based revision. A missing stream is empty.
func (s *Store) readRange(ctx context.Context, stream string, from, count uint64) ([]eventlog.RecordedEvent, error) {
	out, err := call(ctx, s, func(c *esdb.Client) ([]eventlog.RecordedEvent, error) {
		rs, err := c.ReadStream(ctx, stream, esdb.ReadStreamOptions{Direction: esdb.Forwards, From: esdb.Revision(from)}, count)
		if err != nil {
			return nil, err
		}
		defer rs.Close()
		var out []eventlog.RecordedEvent
		for {
			ev, err := rs.Recv()
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			if isCode(err, esdb.ErrorCodeResourceNotFound) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			if ev.Event != nil {
				out = append(out, fromRecorded(ev.Event))
			}
		}
	})
	if err != nil {
		return nil, translate(ctx, err)
	}
	return out, nil
}

// ReadAll returns up to limit events of the selected streams strictly after from, in $all order.
// $all is the server's commit order, so it is gap-free. The v4 client cannot filter $all reads on the
// server, so events are filtered here and reading goes on until limit events matched or $all ends.
func (s *Store) ReadAll(ctx context.Context, from eventlog.Position, limit int) ([]eventlog.RecordedEvent, error) {
	if limit <= 0 {
		return nil, nil
	}
	ctx, done, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()

	var out []eventlog.RecordedEvent
	cursor := from
	batch := min(max(2*limit, 64), 4096)
	for len(out) < limit {
		// call may walk away from a read that outlives it (a dead client, its timeout) and the loop
		// goes on: the read gets this iteration's cursor as a value, never the variable it moves.
		at, want := cursor, limit-len(out)
		page, err := call(ctx, s, func(c *esdb.Client) (allPage, error) {
			return s.readAllPage(ctx, c, at, batch, want)
		})
		if err != nil {
			return nil, fmt.Errorf("read $all after %s: %w", from, translate(ctx, err))
		}
		out = append(out, page.events...)
		cursor = page.cursor
		if len(page.events) == want || page.read < batch {
			break
		}
	}
	return out, nil
}

// allPage is one read of $all: the selected events, how many events it read, where it stopped.
type allPage struct {
	events []eventlog.RecordedEvent
	read   int
	cursor eventlog.Position
}

func (s *Store) readAllPage(ctx context.Context, c *esdb.Client, cursor eventlog.Position, batch, want int) (allPage, error) {
	page := allPage{cursor: cursor}
	rs, err := c.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Forwards, From: allPosition(cursor)}, uint64(batch))
	if err != nil {
		return allPage{}, err
	}
	defer rs.Close()
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return page, nil
		}
		if err != nil {
			return allPage{}, err
		}
		page.read++
		if ev.Event == nil {
			continue
		}
		rec := fromRecorded(ev.Event)
		// A read from a position includes the event at it: that one was returned already.
		if rec.Position.Compare(page.cursor) <= 0 {
			continue
		}
		page.cursor = rec.Position
		if s.selected(rec.StreamID, rec.Type) {
			page.events = append(page.events, rec)
			if len(page.events) == want {
				return page, nil
			}
		}
	}
}

// selected reports whether ReadAll and Subscribe return an event of this stream and type.
func (s *Store) selected(stream, eventType string) bool {
	if strings.HasPrefix(stream, "$") || strings.HasPrefix(eventType, "$") || strings.HasPrefix(stream, ClaimStreamPrefix) {
		return false
	}
	if len(s.opts.prefixes) == 0 {
		return true
	}
	for _, p := range s.opts.prefixes {
		if strings.HasPrefix(stream, p) {
			return true
		}
	}
	return false
}

// allPosition maps a port position to the client's: the zero position is the start of $all.
func allPosition(p eventlog.Position) esdb.AllPosition {
	if p == (eventlog.Position{}) {
		return esdb.Start{}
	}
	return esdb.Position{Commit: p.Commit, Prepare: p.Prepare}
}

func fromRecorded(e *esdb.RecordedEvent) eventlog.RecordedEvent {
	return eventlog.RecordedEvent{
		StreamID:   e.StreamID,
		Version:    e.EventNumber + 1, // server revisions are 0-based, port versions count events
		ID:         eventlog.EventID(e.EventID),
		Type:       e.EventType,
		Data:       e.Data,
		Metadata:   e.UserMetadata,
		Position:   eventlog.Position{Commit: e.Position.Commit, Prepare: e.Position.Prepare},
		RecordedAt: e.CreatedDate,
	}
}
