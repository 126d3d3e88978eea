package readmodel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/postgres"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
)

var (
	_ projections.Projection   = (*ReadModel)(nil)
	_ projections.Resetter     = (*ReadModel)(nil)
	_ projections.CaughtUpHook = (*ReadModel)(nil)
)

// ProjectionName is the calendar projection's checkpoint and lock name.
const ProjectionName = "calendar"

// ReceiptSource reads the receipts naming a booking. *postgres.Store implements it; receipts live in
// PostgreSQL whichever store holds the events.
type ReceiptSource interface {
	ReceiptsForBooking(ctx context.Context, bookingID string) ([]postgres.StoredReceipt, error)
}

// Options tune a read model; zero values take the defaults.
type Options struct {
	// Receipts defaults to postgres.NewStore(pool).
	Receipts ReceiptSource
	// CacheEvents bounds the decoded events kept between batches (200000).
	CacheEvents int
	// ReadConcurrency bounds the streams read from the store at once (4).
	ReadConcurrency int
}

// ReadModel is the calendar projection and its queries. Queries are safe for concurrent use; Apply,
// Load, Reset and CaughtUp are called by one runner at a time.
type ReadModel struct {
	pool     *pgxpool.Pool
	events   eventlog.Store
	codec    ledger.Codec
	receipts ReceiptSource
	locker   *Locker
	readConc int

	mu         sync.Mutex // guards the apply state below
	pos        eventlog.Position
	rebuilding bool
	cache      *streamCache
	// failAfterApply, set by tests, fails a batch after every write and before the commit.
	failAfterApply func() error
}

// New returns the read model on pool (migrated by postgres.Migrate), reading events from events and
// decoding them with codec.
func New(pool *pgxpool.Pool, events eventlog.Store, codec ledger.Codec, opts Options) *ReadModel {
	if opts.Receipts == nil {
		opts.Receipts = postgres.NewStore(pool)
	}
	if opts.CacheEvents <= 0 {
		opts.CacheEvents = 200_000
	}
	if opts.ReadConcurrency <= 0 {
		opts.ReadConcurrency = 4
	}
	return &ReadModel{
		pool: pool, events: events, codec: codec, receipts: opts.Receipts, locker: NewLocker(pool),
		readConc: opts.ReadConcurrency, cache: newStreamCache(opts.CacheEvents),
	}
}

// Name implements projections.Projection.
func (m *ReadModel) Name() string { return ProjectionName }

// Locker returns the advisory-lock locker of the read model's database.
func (m *ReadModel) Locker() *Locker { return m.locker }

// Runner returns a runner of the calendar projection over the read model's event store, elected by
// its advisory lock. `serve` runs it with Run.
func (m *ReadModel) Runner(opts projections.RunnerOptions) *projections.Runner {
	return projections.NewRunner(m.events, m, m.locker, opts)
}

// RebuildBatchSize is the batch a rebuild reads and applies at once: large batches amortise the
// fixed statements of a transaction.
const RebuildBatchSize = 5000

// Rebuild empties the calendar read model and replays the whole log, calling progress after every
// batch (it may be nil). It fails with projections.ErrBusy while another process runs the projection.
func (m *ReadModel) Rebuild(ctx context.Context, progress func(projections.Progress)) error {
	return m.Runner(projections.RunnerOptions{BatchSize: RebuildBatchSize}).Rebuild(ctx, progress)
}

// Load implements projections.Projection.
func (m *ReadModel) Load(ctx context.Context) (eventlog.Position, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.pool.Exec(ctx, `INSERT INTO projection_checkpoints (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`, ProjectionName); err != nil {
		return eventlog.Position{}, fmt.Errorf("create checkpoint %s: %w", ProjectionName, err)
	}
	var (
		c, p       int64
		rebuilding bool
	)
	if err := m.pool.QueryRow(ctx, `SELECT commit_position, prepare_position, rebuilding FROM projection_checkpoints WHERE name = $1`,
		ProjectionName).Scan(&c, &p, &rebuilding); err != nil {
		return eventlog.Position{}, fmt.Errorf("read checkpoint %s: %w", ProjectionName, err)
	}
	m.pos = eventlog.Position{Commit: uint64(c), Prepare: uint64(p)}
	m.rebuilding = rebuilding
	m.cache.reset(m.pos == eventlog.Position{})
	return m.pos, nil
}

// Reset implements projections.Resetter: the calendar tables are emptied and the checkpoint goes
// back to the start, in one transaction. Reconciliation items stay: operators' resolutions are not
// in the log; CaughtUp syncs them with the rebuilt calendar.
func (m *ReadModel) Reset(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `TRUNCATE calendar_bookings, calendar_slots, payment_streams`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO projection_checkpoints AS c (name, rebuilding) VALUES ($1, true)
ON CONFLICT (name) DO UPDATE SET commit_position = 0, prepare_position = 0, events_applied = 0, rebuilding = true, updated_at = now()`,
			ProjectionName)
		return err
	})
	if err != nil {
		return fmt.Errorf("reset %s: %w", ProjectionName, err)
	}
	m.pos = eventlog.Position{}
	m.cache.reset(true)
	return nil
}

// CaughtUp implements projections.CaughtUpHook: it finishes a rebuild (one sync of the reconciliation
// items with the rebuilt calendar) and opens items for quarantined receipts.
func (m *ReadModel) CaughtUp(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rebuilding {
		err := pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
			if err := syncItems(ctx, tx, nil, nil, true); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE projection_checkpoints SET rebuilding = false, updated_at = now() WHERE name = $1`, ProjectionName)
			return err
		})
		if err != nil {
			return fmt.Errorf("finish rebuild of %s: %w", ProjectionName, err)
		}
		m.rebuilding = false
	}
	return syncQuarantine(ctx, m.pool)
}

func positionArgs(p eventlog.Position) (int64, int64, error) {
	if p.Commit > math.MaxInt64 || p.Prepare > math.MaxInt64 {
		return 0, 0, fmt.Errorf("position %s does not fit the checkpoint columns", p)
	}
	return int64(p.Commit), int64(p.Prepare), nil
}

// Apply implements projections.Projection: the read-model changes of events and the checkpoint of the
// last one commit together, after a compare-and-set on the checkpoint that refuses a batch when
// another runner moved it.
func (m *ReadModel) Apply(ctx context.Context, events []eventlog.RecordedEvent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	fresh := events[:0:0]
	for _, e := range events {
		if e.Position.Compare(m.pos) > 0 {
			fresh = append(fresh, e)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	last := fresh[len(fresh)-1].Position
	oldC, oldP, err := positionArgs(m.pos)
	if err != nil {
		return err
	}
	newC, newP, err := positionArgs(last)
	if err != nil {
		return err
	}

	var touched []booking.ID
	seen := map[booking.ID]bool{}
	for _, rec := range fresh {
		id, ok := booking.FromStream(rec.StreamID)
		if !ok {
			continue // not a booking stream: nothing of the calendar's
		}
		ev, err := m.codec.Decode(rec)
		if err != nil {
			return fmt.Errorf("decode %s@%d: %w", rec.StreamID, rec.Version, err)
		}
		m.cache.observe(rec.StreamID, rec.Version, ev)
		if !seen[id] {
			seen[id] = true
			touched = append(touched, id)
		}
	}

	a := &applier{m: m, streams: map[booking.ID]streamData{}}
	if err := a.load(ctx, touched); err != nil {
		return err
	}
	err = pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		var rebuilding bool
		err := tx.QueryRow(ctx, `UPDATE projection_checkpoints
SET commit_position = $2, prepare_position = $3, events_applied = events_applied + $4, updated_at = now()
WHERE name = $1 AND commit_position = $5 AND prepare_position = $6
RETURNING rebuilding`, ProjectionName, newC, newP, len(fresh), oldC, oldP).Scan(&rebuilding)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("at %s: %w", m.pos, projections.ErrCheckpointMoved)
		}
		if err != nil {
			return fmt.Errorf("save checkpoint: %w", err)
		}
		a.tx, a.syncItems = tx, !rebuilding
		if err := a.apply(ctx, touched); err != nil {
			return err
		}
		if m.failAfterApply != nil {
			return m.failAfterApply()
		}
		return nil
	})
	m.cache.trim()
	if err != nil {
		return err
	}
	m.pos = last
	return nil
}
