package readmodel

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
	"bookingledger/domain/resource"
	"bookingledger/projections"
)

var _ projections.Projection = (*ReadModel)(nil)

// ProjectionName is the calendar projection's checkpoint and lock name.
const ProjectionName = "calendar"

// ReceiptSource reads receipts: those naming a booking, those operators look for, and the quarantined
// ones without a reconciliation item.
// *postgres.Store implements it; receipts live in PostgreSQL whichever store holds the events.
type ReceiptSource interface {
	ReceiptsForBooking(ctx context.Context, bookingID string) ([]postgres.StoredReceipt, error)
	ListReceipts(ctx context.Context, f postgres.ReceiptFilter) ([]postgres.StoredReceipt, error)
	ReceiptAndRelated(ctx context.Context, id int64) (postgres.StoredReceipt, []postgres.StoredReceipt, bool, error)
	// QuarantinedReceipts and CountQuarantinedExcept read, in tx, the quarantined receipts whose ids
	// are not in except (those that have their reconciliation item already).
	QuarantinedReceipts(ctx context.Context, tx pgx.Tx, except []int64) ([]postgres.QuarantinedReceipt, error)
	CountQuarantinedExcept(ctx context.Context, tx pgx.Tx, except []int64) (int64, error)
}

// Options tune a read model; zero values take the defaults.
type Options struct {
	// Receipts defaults to postgres.NewStore(pool).
	Receipts ReceiptSource
	// Steps, when set, adds the booking's process steps to its history.
	Steps StepSource
	// Texts, when set, puts the free texts kept apart from the events (cancel reasons) back into the
	// booking's history.
	Texts TextSource
	// Links decodes the events of the link stream (resource.Stream); serve passes the event codec. A
	// read model without it fails on the first link event rather than ignore it.
	Links resource.Codec
	// RebuildChunk is the number of bookings a rebuild computes at once, at least (5000): it holds
	// one chunk in memory at a time, and ends a chunk only between connected sets of claims.
	RebuildChunk int
	// IndexFirstUpTo is the largest replay, in events, whose staging tables get their indexes before
	// the load rather than after it (smallReplay when 0; none when negative): tests set it to run
	// both orders over small logs.
	IndexFirstUpTo int64
	// Phases, when set, is told how long each phase of a rebuild's write took: fold, compute, index, items, swap.
	Phases func(phase string, took time.Duration)
	// Log, when set, is the event log as this database's own tables hold it: set it to the PostgreSQL
	// event store when that store lives in the read model's database (postgres.Store), and a replay
	// from the start of the log reads the events where they lie, neither leaving the database nor
	// copied within it.
	Log LogSource
}

// LogSource is an event log that a statement of the read model's database can read.
type LogSource interface {
	// LogRange finds the events ReadAll would return after from, as of now: how many they are and
	// the position of the last (from when none). The range is final: read later, it holds the same.
	LogRange(ctx context.Context, from eventlog.Position) (int64, eventlog.Position, error)
	// LogRelation is a query of the events after from up to to, with the columns stream_id,
	// version, event_id, event_type, data and metadata.
	LogRelation(from, to eventlog.Position) string
}

// ReadModel is the calendar projection and its queries. Queries are safe for concurrent use; Apply,
// Load, Reset and CaughtUp are called by one runner at a time.
type ReadModel struct {
	pool   *pgxpool.Pool
	events eventlog.Store
	// contacts reads the invitees (adapters/postgres owns the contacts table).
	contacts *postgres.Contacts
	codec    ledger.Codec
	opts     Options

	mu    sync.Mutex // guards the apply state below
	pos   eventlog.Position
	cache *streamCache
	// replay is the bulk load Buffer started and Flush ends (bulk.go); nil outside one.
	replay *replay
	// bufLinks is the fold of the link events of the replay being buffered (with replay).
	bufLinks resource.State
	// resourceIDs caches calendar_resources, which only grows; idsMu guards it, as a rebuild computes
	// chunks at once.
	idsMu       sync.Mutex
	resourceIDs map[string]int32
	// failAfterApply, set by tests, fails a bulk replay after every write and before the commit.
	failAfterApply func() error
	// horizon, set by tests, is the guard's horizon of the bulk replays instead of guardHorizon's.
	horizon time.Time
	// replayBatch, set by tests, is the number of events a bulk replay decodes at once, instead of
	// the constant's.
	replayBatch int
	// chunked is how many bookings the last bulk replay left to its chunks, the others being lone
	// (lone.go), and undone how many of those its fold had computed: for tests.
	chunked, undone int64
	// advanced is closed, and replaced, whenever this process commits a batch or ends a rebuild
	// (Advanced); advMu guards it.
	advMu    sync.Mutex
	advanced chan struct{}
}

// Advanced returns a channel that is closed when this process next moves the calendar's checkpoint
// (a batch or a rebuild committed): the process projection in the same process waits for it instead
// of polling the checkpoint (stepstore.ProjectionConfig.CalendarAdvanced). A calendar run by another
// process never closes it.
func (m *ReadModel) Advanced() <-chan struct{} {
	m.advMu.Lock()
	defer m.advMu.Unlock()
	if m.advanced == nil {
		m.advanced = make(chan struct{})
	}
	return m.advanced
}

// advance wakes the waiters of Advanced.
func (m *ReadModel) advance() {
	m.advMu.Lock()
	defer m.advMu.Unlock()
	if m.advanced != nil {
		close(m.advanced)
		m.advanced = nil
	}
}

// cacheEvents bounds the decoded events kept between batches; readConcurrency the streams read from
// the store at once.
const cacheEvents, readConcurrency = 200_000, 4

// New returns the read model on pool (migrated by postgres.Migrate), reading events from events and
// decoding them with codec.
func New(pool *pgxpool.Pool, events eventlog.Store, codec ledger.Codec, opts Options) *ReadModel {
	if opts.Receipts == nil {
		opts.Receipts = postgres.NewStore(pool)
	}
	if opts.RebuildChunk <= 0 {
		opts.RebuildChunk = 5_000
	}
	if opts.IndexFirstUpTo == 0 {
		opts.IndexFirstUpTo = smallReplay
	}
	return &ReadModel{pool: pool, events: events, contacts: postgres.NewContacts(pool), codec: codec, opts: opts,
		cache: newStreamCache(cacheEvents), resourceIDs: map[string]int32{}}
}

// Name implements projections.Projection.
func (m *ReadModel) Name() string { return ProjectionName }

// RebuildBatchSize is the batch a rebuild reads and applies at once: large batches amortise the
// fixed statements of a transaction.
const RebuildBatchSize = 5000

// Load implements projections.Projection.
func (m *ReadModel) Load(ctx context.Context) (eventlog.Position, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cp, err := checkpoint.Open(ctx, m.pool, ProjectionName)
	if err != nil {
		return eventlog.Position{}, err
	}
	if cp.Rebuilding && cp.Position != (eventlog.Position{}) {
		// An earlier version continued a long rebuild incrementally and synced the items at its end:
		// this one writes a rebuild once, so that one starts again.
		return eventlog.Position{}, m.reset(ctx)
	}
	m.pos, m.replay = cp.Position, nil
	m.cache.reset()
	return m.pos, nil
}

// Reset implements projections.Projection: the calendar tables are emptied and the checkpoint goes
// back to the start, in one transaction. Reconciliation items stay: operators' resolutions are not
// in the log; CaughtUp syncs them with the rebuilt calendar.
func (m *ReadModel) Reset(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reset(ctx)
}

func (m *ReadModel) reset(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		// The links are the calendar's too, written by the rebuild outside the staged swap.
		if _, err := tx.Exec(ctx, `TRUNCATE `+strings.Join(rebuildTables, ", ")+`, calendar_resource_links`); err != nil {
			return err
		}
		return checkpoint.Rewind(ctx, tx, ProjectionName, true)
	})
	if err != nil {
		return fmt.Errorf("reset %s: %w", ProjectionName, err)
	}
	m.pos, m.replay = eventlog.Position{}, nil
	m.cache.reset()
	return nil
}

// CaughtUp implements projections.Projection: it opens items for quarantined receipts.
func (m *ReadModel) CaughtUp(ctx context.Context) error {
	return m.syncQuarantine(ctx)
}

// Apply implements projections.Projection: the read-model changes of events and the checkpoint of the
// last one commit together, after a compare-and-set on the checkpoint that refuses a batch when
// another runner moved it.
func (m *ReadModel) Apply(ctx context.Context, events []eventlog.RecordedEvent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	fresh := m.unseen(events)
	if len(fresh) == 0 {
		return nil
	}
	last := fresh[len(fresh)-1].Position

	var touched orderedSet[booking.ID]
	var links []resource.Event
	born := map[booking.ID]bool{}
	for _, rec := range fresh {
		if rec.StreamID == resource.Stream {
			ev, err := m.decodeLink(rec)
			if err != nil {
				return err
			}
			links = append(links, ev)
			continue
		}
		id, ok := booking.FromStream(rec.StreamID)
		if !ok {
			continue // not a booking stream: nothing of the calendar's
		}
		ev, err := m.codec.Decode(rec)
		if err != nil {
			return fmt.Errorf("decode %s@%d: %w", rec.StreamID, rec.Version, err)
		}
		m.cache.observe(rec.StreamID, rec.Version, ev)
		touched.add(id)
		if rec.Version == 1 {
			born[id] = true
		}
	}

	var lead pgx.Batch
	advanced, err := checkpoint.QueueAdvance(&lead, ProjectionName, m.pos, last, len(fresh))
	if err != nil {
		return err
	}
	lead.QueuedQueries[0].Fn = func(br pgx.BatchResults) error { _, err := advanced(br); return err }
	a := &applier{m: m, streams: map[booking.ID]cacheEntry{}, born: born}
	if err := a.load(ctx, touched.items); err != nil {
		return err
	}
	conn, err := m.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("calendar batch: %w", err)
	}
	defer conn.Release()
	a.tx = &batchTx{conn: conn.Conn(), lead: lead.QueuedQueries}
	err = func() error {
		relinked, err := a.applyLinks(ctx, links)
		if err != nil {
			return err
		}
		if err := a.load(ctx, relinked); err != nil {
			return err
		}
		touched.add(relinked...)
		if err := a.apply(ctx, touched.items); err != nil {
			return err
		}
		return a.tx.finish(ctx)
	}()
	if err != nil {
		a.tx.rollback()
	}
	m.cache.trim()
	if err != nil {
		return err
	}
	m.pos = last
	m.advance()
	return nil
}

// batchPlanning makes each statement's plan once per connection, under checkpoint.IndexedPlanning,
// which keeps it on indexes even when a connection's first batch plans it over the empty tables of a
// fresh database (ADR 0019, TestEveryBatchStatementStaysIndexed).
var batchPlanning = checkpoint.GenericPlanning

// unseen drops the events of a batch at or before what was applied or buffered: a prefix, as a
// batch is in log order.
func (m *ReadModel) unseen(events []eventlog.RecordedEvent) []eventlog.RecordedEvent {
	pos := m.pos
	if m.replay != nil {
		pos = m.replay.last
	}
	i := 0
	for i < len(events) && events[i].Position.Compare(pos) <= 0 {
		i++
	}
	return events[i:]
}

// resourceIDsOf returns the ids of names, numbering new resources first as a batch does
// (numberResourcesSQL). It writes outside the caller's transaction (and commits at once), so that the
// cache never holds an id that a rolled-back batch took with it.
func (m *ReadModel) resourceIDsOf(ctx context.Context, names []string) (map[string]int32, error) {
	m.idsMu.Lock()
	defer m.idsMu.Unlock()
	var missing []string
	for _, n := range names {
		if _, ok := m.resourceIDs[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		if _, err := m.pool.Exec(ctx, numberResourcesSQL, missing); err != nil {
			return nil, fmt.Errorf("number resources: %w", err)
		}
		numbered, err := queryRows(ctx, m.pool, pgx.RowToStructByPos[struct {
			ID   int32
			Name string
		}], `SELECT id, resource FROM calendar_resources WHERE resource = ANY($1)`, missing)
		if err != nil {
			return nil, fmt.Errorf("number resources: %w", err)
		}
		for _, r := range numbered {
			m.resourceIDs[r.Name] = r.ID
		}
	}
	out := make(map[string]int32, len(names))
	for _, n := range names {
		id, ok := m.resourceIDs[n]
		if !ok {
			return nil, fmt.Errorf("number resources: %q has no id", n)
		}
		out[n] = id
	}
	return out, nil
}
