package memstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

var (
	_ eventlog.Store      = (*Store)(nil)
	_ eventlog.Subscriber = (*Store)(nil)
	_ ledger.Store        = (*Store)(nil)
)

// Store keeps every stream, the global log and the receipts in memory. The zero value is not usable:
// create it with New. Safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	streams  map[string][]eventlog.RecordedEvent
	log      []eventlog.RecordedEvent // global order; the event at index i has position i+1
	stored   map[eventlog.EventID]string
	receipts []ledger.Receipt
	// appended is closed (and replaced) by every write that adds events, to wake subscribers.
	appended chan struct{}
}

// New returns an empty store.
func New() *Store {
	return &Store{streams: map[string][]eventlog.RecordedEvent{}, stored: map[eventlog.EventID]string{},
		appended: make(chan struct{})}
}

// Append implements eventlog.Store.
func (s *Store) Append(_ context.Context, stream string, expected eventlog.ExpectedVersion, events []eventlog.EventData) (eventlog.AppendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.check(stream, expected, events)
	if err != nil || res.Duplicate {
		return res, err
	}
	return s.write(stream, events), nil
}

// check validates one append against the stored streams without writing: the result is filled only
// for a duplicate re-append.
func (s *Store) check(stream string, expected eventlog.ExpectedVersion, events []eventlog.EventData) (eventlog.AppendResult, error) {
	if err := eventlog.Validate(stream, events); err != nil {
		return eventlog.AppendResult{}, err
	}
	known := 0
	for _, e := range events {
		if _, ok := s.stored[e.ID]; ok {
			known++
		}
	}
	recs := s.streams[stream]
	if known == len(events) {
		// Stored already: a re-append of exactly these events (same stream, same order) is a duplicate.
		if i := slices.IndexFunc(recs, func(r eventlog.RecordedEvent) bool { return r.ID == events[0].ID }); i >= 0 && i+len(events) <= len(recs) {
			same := true
			for k, e := range events {
				same = same && recs[i+k].ID == e.ID
			}
			if same {
				last := recs[i+len(events)-1]
				return eventlog.AppendResult{FirstVersion: recs[i].Version, LastVersion: last.Version, Position: last.Position, Duplicate: true}, nil
			}
		}
	}
	if known > 0 {
		return eventlog.AppendResult{}, fmt.Errorf("append to %s: %d of %d events: %w", stream, known, len(events), eventlog.ErrPartialDuplicate)
	}
	if current := uint64(len(recs)); !expected.Allows(current) {
		return eventlog.AppendResult{}, fmt.Errorf("append to %s at version %d, expected %s: %w", stream, current, expected, eventlog.ErrVersionConflict)
	}
	return eventlog.AppendResult{}, nil
}

// write appends checked events; the caller holds s.mu.
func (s *Store) write(stream string, events []eventlog.EventData) eventlog.AppendResult {
	now := time.Now().UTC()
	first := uint64(len(s.streams[stream])) + 1
	for k, e := range events {
		p := uint64(len(s.log)) + 1
		r := eventlog.RecordedEvent{StreamID: stream, Version: first + uint64(k), ID: e.ID, Type: e.Type,
			Data: slices.Clone(e.Data), Metadata: slices.Clone(e.Metadata), Position: eventlog.Position{Commit: p, Prepare: p}, RecordedAt: now}
		s.streams[stream] = append(s.streams[stream], r)
		s.log = append(s.log, r)
		s.stored[e.ID] = stream
	}
	close(s.appended)
	s.appended = make(chan struct{})
	return eventlog.AppendResult{FirstVersion: first, LastVersion: first + uint64(len(events)) - 1, Position: s.log[len(s.log)-1].Position}
}

// ReadStream implements eventlog.Store.
func (s *Store) ReadStream(_ context.Context, stream string) ([]eventlog.RecordedEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return detached(s.streams[stream]), nil
}

// ReadAll implements eventlog.Store. Writes are serialized, so the log is gap-free as it is.
func (s *Store) ReadAll(_ context.Context, from eventlog.Position, limit int) ([]eventlog.RecordedEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearchFunc(s.log, from, func(r eventlog.RecordedEvent, p eventlog.Position) int {
		if r.Position.Compare(p) <= 0 {
			return -1
		}
		return 1
	})
	return detached(s.log[i:min(len(s.log), i+max(limit, 0))]), nil
}

// detached copies records with their bytes, so that a caller decoding or changing them in place
// changes nothing stored, as with a store that reads them from elsewhere.
func detached(rs []eventlog.RecordedEvent) []eventlog.RecordedEvent {
	out := slices.Clone(rs)
	for i := range out {
		out[i].Data, out[i].Metadata = slices.Clone(out[i].Data), slices.Clone(out[i].Metadata)
	}
	return out
}

// Subscribe implements eventlog.Subscriber.
func (s *Store) Subscribe(ctx context.Context, from eventlog.Position, handle func(eventlog.RecordedEvent) error) error {
	for {
		s.mu.Lock()
		wake := s.appended
		s.mu.Unlock()
		events, _ := s.ReadAll(ctx, from, 1000)
		for _, e := range events {
			if err := handle(e); err != nil {
				return fmt.Errorf("subscription at %s: %w", e.Position, err)
			}
			from = e.Position
		}
		if len(events) == 1000 {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// Commit implements ledger.Store: every append and the receipt, or nothing. A receipt committed as
// accepted is stored as duplicate when every append was an idempotent re-append.
func (s *Store) Commit(_ context.Context, c ledger.Commit) (ledger.CommitResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	results := make([]eventlog.AppendResult, len(c.Appends))
	for i, a := range c.Appends {
		res, err := s.check(a.Stream, a.Expected, a.Events)
		if err != nil {
			return ledger.CommitResult{}, err
		}
		results[i] = res
	}
	outcome := c.Receipt.Outcome
	allDuplicate := len(c.Appends) > 0
	for i, a := range c.Appends {
		if !results[i].Duplicate {
			results[i] = s.write(a.Stream, a.Events)
			allDuplicate = false
		}
	}
	if outcome == ledger.OutcomeAccepted && allDuplicate {
		outcome = ledger.OutcomeDuplicate
	}
	r := c.Receipt
	r.Outcome, r.Body, r.Events = outcome, slices.Clone(r.Body), slices.Clone(r.Events)
	s.receipts = append(s.receipts, r)
	return ledger.CommitResult{Appends: results, Outcome: outcome}, nil
}

// ReceiptsForBooking returns the receipts whose deliveries carried events of b, in the order stored.
func (s *Store) ReceiptsForBooking(_ context.Context, b booking.ID) []ledger.Receipt {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ledger.Receipt
	for _, r := range s.receipts {
		if slices.ContainsFunc(r.Events, func(e ledger.EventRef) bool { return e.Booking == b }) {
			out = append(out, r)
		}
	}
	return out
}
