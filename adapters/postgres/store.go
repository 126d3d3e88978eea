package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

var (
	_ eventlog.Store      = (*Store)(nil)
	_ eventlog.Subscriber = (*Store)(nil)
	_ ledger.Store        = (*Store)(nil)
)

// defaultPollInterval bounds how long a subscriber waits when a notification is lost or when the
// events it was told about were not yet readable (an older transaction was still open).
const defaultPollInterval = time.Second

// defaultNotifyInterval is the least time between two notifications one store sends: writes in between
// share the next one.
const defaultNotifyInterval = 20 * time.Millisecond

// Store is the PostgreSQL event store and ledger store. It is safe for concurrent use.
type Store struct {
	pool           *pgxpool.Pool
	noSetAppend    bool         // tests only: every group's appends through bl_append (SetAppendOff)
	setGroups      atomic.Int64 // groups committed through the set-based append (tests: SetGroups)
	pollInterval   time.Duration
	rereadFirst    time.Duration // first quick re-read after progress or a notification
	rereadLast     time.Duration // quick re-reads stop beyond this (and beyond pollInterval)
	notifyInterval time.Duration
	tailPacing     time.Duration // least time between two tail reads that find events
	notifier       atomic.Int32  // notifierIdle, notifierRunning or notifierDirty
	commits        *group[commitReq, ledger.CommitResult]
	sealer         ledger.BodySealer
	reads          *group[string, []eventlog.RecordedEvent]
	tail           tail // the subscriptions' shared reader of the end of the log
}

// NewStore returns a store over pool. The schema must be migrated (Migrate).
func NewStore(pool *pgxpool.Pool) *Store {
	s := &Store{pool: pool, pollInterval: defaultPollInterval, rereadFirst: defaultRereadFirst,
		rereadLast: defaultPollInterval, notifyInterval: defaultNotifyInterval, tailPacing: defaultTailPacing}
	s.commits = &group[commitReq, ledger.CommitResult]{max: maxCommitGroup, runners: commitRunners, run: s.commitGroup}
	s.reads = &group[string, []eventlog.RecordedEvent]{max: maxReadGroup, runners: readRunners, run: s.readStreams}
	return s
}

// appendSQL is one round trip (once the pooled connection has prepared it): bl_append locks the
// stream, checks idempotency and the expected version, and writes the events
// (migrations/0001_event_store.sql).
const appendSQL = `SELECT first_version, last_version, tx_id, global_position, duplicate
FROM bl_append($1, $2, $3, $4, $5, $6, $7)`

// Append implements eventlog.Store.
func (s *Store) Append(ctx context.Context, stream string, expected eventlog.ExpectedVersion, events []eventlog.EventData) (eventlog.AppendResult, error) {
	if err := eventlog.Validate(stream, events); err != nil {
		return eventlog.AppendResult{}, err
	}
	res, err := scanAppend(s.pool.QueryRow(ctx, appendSQL, appendArgs(stream, expected, events)...))
	if err != nil {
		return eventlog.AppendResult{}, fmt.Errorf("append to %s: %w", stream, translate(err))
	}
	if !res.Duplicate {
		s.wrote()
	}
	return res, nil
}

// appendParams are bl_append's arguments for one append.
type appendParams struct {
	stream, kind string
	version      int64
	ids          [][16]byte
	types        []string
	data, meta   [][]byte
}

func newAppendParams(stream string, expected eventlog.ExpectedVersion, events []eventlog.EventData) appendParams {
	p := appendParams{stream: stream, kind: "any", ids: make([][16]byte, len(events)), types: make([]string, len(events)),
		data: make([][]byte, len(events)), meta: make([][]byte, len(events))}
	switch {
	case expected.IsNoStream():
		p.kind = "no_stream"
	case expected.IsStreamExists():
		p.kind = "stream_exists"
	default:
		if v, ok := expected.Exact(); ok {
			p.kind, p.version = "exact", int64(v)
		}
	}
	for i, e := range events {
		p.ids[i], p.types[i], p.data[i], p.meta[i] = e.ID, e.Type, e.Data, e.Metadata
	}
	return p
}

func appendArgs(stream string, expected eventlog.ExpectedVersion, events []eventlog.EventData) []any {
	p := newAppendParams(stream, expected, events)
	return []any{p.stream, p.kind, p.version, p.ids, p.types, p.data, p.meta}
}

func scanAppend(row pgx.Row) (eventlog.AppendResult, error) {
	var (
		first, last, pos int64
		tx               uint64
		res              eventlog.AppendResult
	)
	if err := row.Scan(&first, &last, &tx, &pos, &res.Duplicate); err != nil {
		return eventlog.AppendResult{}, err
	}
	res.FirstVersion, res.LastVersion = uint64(first), uint64(last)
	res.Position = eventlog.Position{Commit: tx, Prepare: uint64(pos)}
	return res, nil
}

const eventColumns = `stream_id, version, event_id, event_type, data, metadata, tx_id, global_position, recorded_at`

// maxReadGroup bounds the streams one grouped read fetches; readRunners is how many grouped reads
// run at once.
const (
	maxReadGroup = 64
	readRunners  = 2
)

// ReadStream implements eventlog.Store. Reads that arrive while another read is in flight are fetched
// together in the next one (one round trip for a group of deliveries, like Commit).
func (s *Store) ReadStream(ctx context.Context, stream string) ([]eventlog.RecordedEvent, error) {
	events, err := s.reads.do(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("read stream %s: %w", stream, err)
	}
	return events, nil
}

// readStreams reads a group of streams in one query and hands each caller its own stream.
func (s *Store) readStreams(ctx context.Context, streams []string) ([][]eventlog.RecordedEvent, []error) {
	out := make([][]eventlog.RecordedEvent, len(streams))
	errs := make([]error, len(streams))
	var (
		rows pgx.Rows
		err  error
	)
	if len(streams) == 1 {
		rows, err = s.pool.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE stream_id = $1 ORDER BY version`, streams[0])
	} else {
		rows, err = s.pool.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE stream_id = ANY($1) ORDER BY stream_id, version`, streams)
	}
	var events []eventlog.RecordedEvent
	if err == nil {
		events, err = collectEvents(rows, 8*len(streams))
	}
	if err != nil {
		err = translate(err)
		for i := range errs {
			errs[i] = err
		}
		return out, errs
	}
	byStream := make(map[string][]eventlog.RecordedEvent, len(streams))
	for i := 0; i < len(events); {
		j := i + 1
		for j < len(events) && events[j].StreamID == events[i].StreamID {
			j++
		}
		byStream[events[i].StreamID] = events[i:j:j] // capped: a caller's append never reaches another's events
		i = j
	}
	for i, st := range streams {
		if out[i] = byStream[st]; out[i] == nil {
			out[i] = []eventlog.RecordedEvent{}
		}
	}
	return out, errs
}

// readAllSQL returns only rows of transactions older than every transaction still running: those can
// no longer change, so the order below never gains an event before one already returned. The ADR
// (docs/adr/0002-global-order-on-postgres.md) explains why and what it costs.
const readAllSQL = `SELECT ` + eventColumns + `
FROM events
WHERE ` + readableAfter + `
ORDER BY tx_id, global_position
LIMIT $3`

// readableAfter is ReadAll's rule: the events after the position $1/$2 that every reader can see.
// EventsAfter and LogRange apply the same.
const readableAfter = `(tx_id, global_position) > ($1::xid8, $2::bigint)
  AND tx_id < pg_snapshot_xmin(pg_current_snapshot())`

// ReadAll implements eventlog.Store. Position.Commit is the writing transaction's xid8 and
// Position.Prepare the event's global_position.
func (s *Store) ReadAll(ctx context.Context, from eventlog.Position, limit int) ([]eventlog.RecordedEvent, error) {
	if limit <= 0 {
		return []eventlog.RecordedEvent{}, nil
	}
	rows, err := s.pool.Query(ctx, readAllSQL, from.Commit, int64(from.Prepare), limit)
	if err != nil {
		return nil, fmt.Errorf("read all from %s: %w", from, translate(err))
	}
	events, err := collectEvents(rows, limit)
	if err != nil {
		return nil, fmt.Errorf("read all from %s: %w", from, translate(err))
	}
	return events, nil
}

// collectEvents reads up to sizeHint events (the slice grows beyond it if need be). A rebuild reads
// the whole log through here, so it allocates per read rather than per event where it can: the
// events' bytes come out of a few shared blocks, and their types (a handful of names) are interned.
func collectEvents(rows pgx.Rows, sizeHint int) ([]eventlog.RecordedEvent, error) {
	defer rows.Close()
	events := make([]eventlog.RecordedEvent, 0, min(sizeHint, firstEventsHint))
	var (
		arena byteArena
		types = map[string]string{}
	)
	for rows.Next() {
		var (
			e             eventlog.RecordedEvent
			version, pos  int64
			typ, data, md pgtype.DriverBytes // valid until the next row: copied below
		)
		if err := rows.Scan(&e.StreamID, &version, (*[16]byte)(&e.ID), &typ, &data, &md,
			&e.Position.Commit, &pos, &e.RecordedAt); err != nil {
			return nil, err
		}
		t, ok := types[string(typ)]
		if !ok {
			t = string(typ)
			types[t] = t
		}
		e.Type, e.Data, e.Metadata = t, arena.copy(data), arena.copy(md)
		e.Version, e.Position.Prepare = uint64(version), uint64(pos)
		events = append(events, e)
	}
	return events, rows.Err()
}

// firstEventsHint caps the capacity collectEvents reserves up front: a subscription's read asks for
// hundreds and mostly gets a few, a replay's grows by doubling.
const firstEventsHint = 64

// byteArena copies byte slices into shared blocks. A slice it returns keeps its whole block alive,
// which is fine for events that are decoded and dropped, as every reader here does. Blocks start at
// arenaFirstBlock and double up to arenaBlock, so that a read of a few events does not take 64 KiB.
type byteArena struct{ block []byte }

const (
	arenaFirstBlock = 4 << 10
	arenaBlock      = 64 << 10
)

// copy returns a copy of b: nil for nil (a NULL column), non-nil for an empty b.
func (a *byteArena) copy(b []byte) []byte {
	if b == nil {
		return nil
	}
	if a.block == nil || len(b) > cap(a.block)-len(a.block) {
		size := arenaFirstBlock
		if a.block != nil {
			size = min(2*cap(a.block), arenaBlock)
		}
		a.block = make([]byte, 0, max(size, len(b)))
	}
	start := len(a.block)
	a.block = append(a.block, b...)
	return a.block[start:len(a.block):len(a.block)]
}
