package eventlog

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Stores wrap them with %w; callers use errors.Is.
var (
	// ErrVersionConflict: the stream's version did not match the expected version.
	ErrVersionConflict = errors.New("wrong expected version")
	// ErrPartialDuplicate: some, but not all, of the appended event IDs are already stored, or they are
	// stored in another stream or another order. Re-appending exactly the same events is not an error.
	ErrPartialDuplicate = errors.New("event IDs partly stored already")
	// ErrInvalidAppend: the append itself is malformed (no events, empty stream name, zero event ID).
	ErrInvalidAppend = errors.New("invalid append")
	// ErrUnavailable: the store cannot be reached; the caller may retry later.
	ErrUnavailable = errors.New("event store unavailable")
)

// EventID identifies an event across all streams. Callers derive it deterministically from the
// provider's identity of the event, so a redelivery carries the same ID.
type EventID [16]byte

// String formats the ID as a canonical lowercase UUID.
func (id EventID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}

// IsZero reports whether the ID is unset.
func (id EventID) IsZero() bool { return id == EventID{} }

// ParseEventID parses a canonical UUID string.
func ParseEventID(s string) (EventID, error) {
	var id EventID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, fmt.Errorf("parse event id %q: not a canonical UUID", s)
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if _, err := hex.Decode(id[:], []byte(h)); err != nil {
		return EventID{}, fmt.Errorf("parse event id %q: %w", s, err)
	}
	return id, nil
}

// Compare orders IDs bytewise; used as the last tie-breaker of deterministic orders.
func (id EventID) Compare(other EventID) int {
	for i := range id {
		if id[i] != other[i] {
			if id[i] < other[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// ExpectedVersion is the optimistic-concurrency condition of an append.
// Versions count events: a stream with n events has version n, its events have versions 1..n.
type ExpectedVersion struct {
	kind    expectKind
	version uint64
}

type expectKind uint8

const (
	expectAny expectKind = iota
	expectNoStream
	expectStreamExists
	expectExact
)

// Any appends whatever the stream's version.
func Any() ExpectedVersion { return ExpectedVersion{kind: expectAny} }

// NoStream appends only if the stream has no events.
func NoStream() ExpectedVersion { return ExpectedVersion{kind: expectNoStream} }

// StreamExists appends only if the stream has at least one event.
func StreamExists() ExpectedVersion { return ExpectedVersion{kind: expectStreamExists} }

// Exact appends only if the stream's version is v. Exact(0) is the same condition as NoStream.
func Exact(v uint64) ExpectedVersion { return ExpectedVersion{kind: expectExact, version: v} }

// IsAny, IsNoStream, IsStreamExists and Exact let stores map the condition to their own encoding.
func (e ExpectedVersion) IsAny() bool          { return e.kind == expectAny }
func (e ExpectedVersion) IsNoStream() bool     { return e.kind == expectNoStream }
func (e ExpectedVersion) IsStreamExists() bool { return e.kind == expectStreamExists }

// Exact returns the exact version expected and whether the condition is an exact one.
func (e ExpectedVersion) Exact() (uint64, bool) { return e.version, e.kind == expectExact }

// Allows reports whether a stream at version current satisfies the condition.
func (e ExpectedVersion) Allows(current uint64) bool {
	switch e.kind {
	case expectNoStream:
		return current == 0
	case expectStreamExists:
		return current > 0
	case expectExact:
		return current == e.version
	default:
		return true
	}
}

func (e ExpectedVersion) String() string {
	switch e.kind {
	case expectNoStream:
		return "no-stream"
	case expectStreamExists:
		return "stream-exists"
	case expectExact:
		return fmt.Sprintf("exact(%d)", e.version)
	default:
		return "any"
	}
}

// EventData is an event to append. Data and Metadata are opaque bytes (JSON by convention).
type EventData struct {
	ID       EventID
	Type     string
	Data     []byte
	Metadata []byte
}

// Position is a place in the global log. Stores define the two numbers so that positions compare
// lexicographically in log order: PostgreSQL uses (transaction id, sequence), EventStoreDB its
// (commit, prepare) position. The zero Position is before every event.
type Position struct {
	Commit  uint64
	Prepare uint64
}

// Compare returns -1, 0 or 1 as p is before, equal to or after q.
func (p Position) Compare(q Position) int {
	switch {
	case p.Commit < q.Commit:
		return -1
	case p.Commit > q.Commit:
		return 1
	case p.Prepare < q.Prepare:
		return -1
	case p.Prepare > q.Prepare:
		return 1
	}
	return 0
}

func (p Position) String() string { return fmt.Sprintf("%d/%d", p.Commit, p.Prepare) }

// RecordedEvent is a stored event.
type RecordedEvent struct {
	StreamID   string
	Version    uint64 // 1-based position in its stream
	ID         EventID
	Type       string
	Data       []byte
	Metadata   []byte
	Position   Position
	RecordedAt time.Time
}

// AppendResult describes a successful append.
type AppendResult struct {
	// FirstVersion and LastVersion are the stream versions of the first and last appended event.
	FirstVersion uint64
	LastVersion  uint64
	// Position is the global position of the last appended event.
	Position Position
	// Duplicate is true when every event ID was already stored in this stream, in this order: nothing
	// was written and the versions are those of the original append.
	Duplicate bool
}

// Store is the port every event store implements.
type Store interface {
	// Append writes events to the end of a stream if expected allows the stream's current version.
	// Re-appending exactly the events of an earlier append (same IDs, same order, same stream) succeeds
	// with Duplicate set and the original versions, whatever expected says. A partial overlap fails
	// with ErrPartialDuplicate; a version mismatch with ErrVersionConflict.
	Append(ctx context.Context, stream string, expected ExpectedVersion, events []EventData) (AppendResult, error)
	// ReadStream returns a stream's events in version order; a missing stream is empty, not an error.
	ReadStream(ctx context.Context, stream string) ([]RecordedEvent, error)
	// ReadAll returns up to limit events strictly after from, in global order. The order is gap-free:
	// an event that becomes visible later never has a position at or before one already returned.
	ReadAll(ctx context.Context, from Position, limit int) ([]RecordedEvent, error)
}

// Validate checks what every store rejects before it touches storage.
func Validate(stream string, events []EventData) error {
	if stream == "" {
		return fmt.Errorf("%w: empty stream name", ErrInvalidAppend)
	}
	if len(events) == 0 {
		return fmt.Errorf("%w: no events for %s", ErrInvalidAppend, stream)
	}
	seen := make(map[EventID]struct{}, len(events))
	for i, e := range events {
		if e.ID.IsZero() {
			return fmt.Errorf("%w: event %d of %s has no ID", ErrInvalidAppend, i, stream)
		}
		if e.Type == "" {
			return fmt.Errorf("%w: event %d of %s has no type", ErrInvalidAppend, i, stream)
		}
		if _, dup := seen[e.ID]; dup {
			return fmt.Errorf("%w: event ID %s twice in one append to %s", ErrInvalidAppend, e.ID, stream)
		}
		seen[e.ID] = struct{}{}
	}
	return nil
}

// Subscriber is implemented by stores that can push new events. Subscribe calls handle for every event
// after from, in global order: it first catches up from the given position (never live-only), then
// follows new events, surviving dropped connections by resuming from the last handled position. It
// returns when ctx ends (ctx.Err()) or when handle returns an error (that error, wrapped).
type Subscriber interface {
	Subscribe(ctx context.Context, from Position, handle func(RecordedEvent) error) error
}

// Sleep waits d, or until ctx ends (then it returns ctx.Err()): the wait between polls of the log, for
// stores and projection runners alike.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
