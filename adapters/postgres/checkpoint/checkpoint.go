package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/domain/eventlog"
	"bookingledger/projections"
)

var _ projections.Projection = (*Projection)(nil)

// ApplyFunc applies events, which follow the last applied position in global order, inside tx. The
// checkpoint has already been advanced in tx; returning an error rolls both back.
type ApplyFunc func(ctx context.Context, tx pgx.Tx, events []eventlog.RecordedEvent) error

// ResetFunc empties what a rebuild recomputes, inside the transaction that moves the checkpoint back to
// the start of the log.
type ResetFunc func(ctx context.Context, tx pgx.Tx) error

// Config names a projection and says how it applies and resets.
type Config struct {
	// Name is the checkpoint row and the runner's lock name. It must be unique among projections.
	Name string
	// Apply is required.
	Apply ApplyFunc
	// Reset is optional: without it a rebuild only moves the checkpoint back, and Apply must be
	// idempotent on a replay (projections that plan effects are: they find their existing keys).
	Reset ResetFunc
	// Idle is optional: it reports that Apply would write nothing now, whatever the events (the relay
	// without an endpoint). Such a batch only moves the checkpoint, in one statement and no transaction
	// (AdvanceAlone). It is asked before every batch while they are idle, and IdleRecheck after the
	// last one that was not.
	Idle func(ctx context.Context) (bool, error)
}

// IdleRecheck is how long a projection whose batches were not idle applies them without asking
// Config.Idle again (an answer that is out of date only costs the transaction it would have saved).
const IdleRecheck = 10 * time.Second

// Projection is a projections.Projection whose checkpoint lives in projection_checkpoints. Apply, Load
// and Reset are called by one runner at a time.
type Projection struct {
	pool *pgxpool.Pool
	cfg  Config
	keep *Keeper

	mu sync.Mutex
	// busySince is when Config.Idle last answered false (zero: idle, or never asked).
	busySince time.Time
}

// New returns the projection on pool (migrated by postgres.Migrate).
func New(pool *pgxpool.Pool, cfg Config) (*Projection, error) {
	if pool == nil || cfg.Name == "" || cfg.Apply == nil {
		return nil, errors.New("checkpoint: pool, name and apply are required")
	}
	return &Projection{pool: pool, cfg: cfg, keep: NewKeeper(pool, cfg.Name)}, nil
}

// Name implements projections.Projection.
func (p *Projection) Name() string { return p.cfg.Name }

// Load implements projections.Projection: it creates the checkpoint row on first use.
func (p *Projection) Load(ctx context.Context) (eventlog.Position, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keep.Load(ctx)
}

// Apply implements projections.Projection. Events at or before the position applied are skipped, so
// a batch that overlaps what was applied is harmless. An idle batch (Config.Idle) moves the
// checkpoint through the Keeper, which saves it within IdleFlush.
func (p *Projection) Apply(ctx context.Context, events []eventlog.RecordedEvent) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	fresh := p.keep.Fresh(events)
	if len(fresh) == 0 {
		return nil
	}
	last := fresh[len(fresh)-1].Position
	idle, err := p.idle(ctx)
	if err != nil {
		return err
	}
	if idle {
		return p.keep.Skip(ctx, last, len(fresh))
	}
	return p.keep.Apply(ctx, last, len(fresh), func(tx pgx.Tx) error { return p.cfg.Apply(ctx, tx, fresh) })
}

// idle asks Config.Idle, unless it answered false less than IdleRecheck ago.
func (p *Projection) idle(ctx context.Context) (bool, error) {
	if p.cfg.Idle == nil || !p.busySince.IsZero() && time.Since(p.busySince) < IdleRecheck {
		return false, nil
	}
	idle, err := p.cfg.Idle(ctx)
	if err != nil {
		return false, fmt.Errorf("%s: idle: %w", p.cfg.Name, err)
	}
	p.busySince = time.Time{}
	if !idle {
		p.busySince = time.Now()
	}
	return idle, nil
}

// IndexedPlanning are the settings a projection's batch plans under (ADR 0019): every statement of a
// batch is a lookup of the batch's keys, for which an index is right whatever the statistics say. A
// connection keeps the plan it made at its first executions, which on a fresh database meet empty,
// never-analyzed tables, where a keyed lookup plans as a sequential scan that then stays while the
// tables grow. And no batch statement is large enough for JIT to pay for its compilation.
var IndexedPlanning = []string{"enable_seqscan = off", "jit = off"}

// BeginIndexed begins a transaction under IndexedPlanning, as Apply begins every batch.
var BeginIndexed = "BEGIN; SET LOCAL " + strings.Join(IndexedPlanning, "; SET LOCAL ")

// GenericPlanning is IndexedPlanning with plan_cache_mode = force_generic_plan: a connection plans
// each statement once, at its first execution, instead of at its first five and then at every
// execution whose custom plan PostgreSQL estimates cheaper than the generic one (a lookup of
// = ANY($1), whose array's length only the custom plan knows, is planned at every execution). Only
// for projections whose plan tests explain the generic plans: the calendar's and the process steps'.
var GenericPlanning = append([]string{"plan_cache_mode = force_generic_plan"}, IndexedPlanning...)

// BeginGeneric begins a transaction under GenericPlanning.
var BeginGeneric = "BEGIN; SET LOCAL " + strings.Join(GenericPlanning, "; SET LOCAL ")

// QueueIndexedRead queues on b a read-only transaction of its own that runs sql under
// IndexedPlanning — a connection that planned a keyed lookup while its table was a page would
// otherwise keep scanning the whole table as it grows — with a text of its own, so that its prepared
// statement keeps the plan made under those settings (a connection's cached plan does not follow the
// settings in force when it runs). For reads a step's claim sends after its COMMIT, in its second
// round trip, and for reads of their own. scan reads sql's results; its error lands in readErr, and
// no callback fails b. Callers set readErr first (ErrNotAnswered) so that a batch that never reached
// the read says so; a read that failed leaves the connection in a failed transaction, which the
// caller rolls back (a pool closes a connection released in one).
func QueueIndexedRead(b *pgx.Batch, sql string, args []any, scan func(pgx.BatchResults) error, readErr *error) {
	exec := func(stmt string) {
		// A failed BEGIN or SET fails the read after it, which says so.
		b.Queue(stmt).Fn = func(br pgx.BatchResults) error { _, _ = br.Exec(); return nil }
	}
	exec("BEGIN READ ONLY")
	for _, set := range IndexedPlanning {
		exec("SET LOCAL " + set)
	}
	b.Queue(sql+" -- indexed", args...).Fn = func(br pgx.BatchResults) error {
		if err := scan(br); err != nil {
			*readErr = err
		}
		return nil
	}
	exec("COMMIT")
}

// IndexedRead runs sql on pool as a read of its own under IndexedPlanning (QueueIndexedRead), in one
// round trip, and hands its rows to scan; it returns scan's error, or the batch's when the read was
// not answered. For reads that run again and again on a pool's long-lived connections over tables
// that grow (the steps gauge, the inbox, a seated event's attendees).
func IndexedRead(ctx context.Context, pool *pgxpool.Pool, sql string, args []any, scan func(pgx.Rows) error) error {
	readErr := ErrNotAnswered
	b := &pgx.Batch{}
	QueueIndexedRead(b, sql, args, func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		if err := scan(rows); err != nil {
			return err
		}
		if err := rows.Err(); err != nil {
			return err
		}
		readErr = nil
		return nil
	}, &readErr)
	// A read that failed leaves its connection in a failed transaction: the pool closes it on release.
	switch err := pool.SendBatch(ctx, b).Close(); {
	case err == nil:
	case readErr == nil:
		readErr = err
	case errors.Is(readErr, ErrNotAnswered):
		readErr = fmt.Errorf("%w: %w", ErrNotAnswered, err) // why: no connection, the server gone, ctx
	}
	return readErr
}

// ErrNotAnswered is a queued read's error until its batch reaches it (QueueIndexedRead).
var ErrNotAnswered = errors.New("the read was not answered")

// CaughtUp implements projections.Projection: the idle batches' checkpoint is saved now.
func (p *Projection) CaughtUp(ctx context.Context) error { return p.keep.Flush(ctx) }

// Reset implements projections.Projection: Config.Reset (if any) and the checkpoint's return to the start
// of the log commit together.
func (p *Projection) Reset(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var reset func(pgx.Tx) error
	if p.cfg.Reset != nil {
		reset = func(tx pgx.Tx) error { return p.cfg.Reset(ctx, tx) }
	}
	if err := p.keep.Reset(ctx, reset); err != nil {
		return fmt.Errorf("reset %s: %w", p.cfg.Name, err)
	}
	return nil
}

// Querier is what Load and Advance need: a pool, a connection or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Checkpoint is a projection's saved row.
type Checkpoint struct {
	Name     string
	Position eventlog.Position
	// EventsApplied counts the events applied since the last rebuild (or the first start).
	EventsApplied int64
	// Rebuilding is set by a rebuild's reset and cleared when the rebuild caught up.
	Rebuilding bool
	UpdatedAt  time.Time
}

// Load returns the saved checkpoint of name, creating the row at the start of the log on first use.
func Load(ctx context.Context, q Querier, name string) (eventlog.Position, error) {
	cp, err := Open(ctx, q, name)
	return cp.Position, err
}

// Open is Load with the whole row.
func Open(ctx context.Context, q Querier, name string) (Checkpoint, error) {
	if _, err := q.Exec(ctx, `INSERT INTO projection_checkpoints (name) VALUES ($1) ON CONFLICT (name) DO NOTHING`, name); err != nil {
		return Checkpoint{}, fmt.Errorf("create checkpoint %s: %w", name, err)
	}
	return Read(ctx, q, name)
}

// Read returns the saved checkpoint of name; a projection that never ran is at the start of the log.
func Read(ctx context.Context, q Querier, name string) (Checkpoint, error) {
	cp := Checkpoint{Name: name}
	var c, pr int64
	err := q.QueryRow(ctx, `SELECT commit_position, prepare_position, events_applied, rebuilding, updated_at
FROM projection_checkpoints WHERE name = $1`, name).Scan(&c, &pr, &cp.EventsApplied, &cp.Rebuilding, &cp.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return cp, nil
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("read checkpoint %s: %w", name, err)
	}
	cp.Position = eventlog.Position{Commit: uint64(c), Prepare: uint64(pr)}
	return cp, nil
}

// Advance moves name's checkpoint from from to to within tx, counting n events applied, and reports
// whether the projection is rebuilding. It fails with projections.ErrCheckpointMoved when the saved
// checkpoint is not from: another runner wrote it, and the caller must roll back.
func Advance(ctx context.Context, tx pgx.Tx, name string, from, to eventlog.Position, n int) (rebuilding bool, err error) {
	args, err := advanceArgs(name, from, to, n)
	if err != nil {
		return false, err
	}
	return advanced(tx.QueryRow(ctx, advanceSQL, args...), name, from)
}

// AdvanceAlone is Advance as a statement of its own, outside any transaction, for a batch that
// writes nothing else: one round trip instead of a transaction's four. Its compare-and-set fences a
// runner that lost its lock as Advance's does.
func AdvanceAlone(ctx context.Context, q Querier, name string, from, to eventlog.Position, n int) (rebuilding bool, err error) {
	args, err := advanceArgs(name, from, to, n)
	if err != nil {
		return false, err
	}
	return advanced(q.QueryRow(ctx, advanceSQL, args...), name, from)
}

// QueueAdvance is Advance as one query of b, for a projection that sends its writes in one round
// trip: read reads its outcome from the batch's results when its turn comes (in queue order), and
// the caller rolls back on its error as on Advance's.
func QueueAdvance(b *pgx.Batch, name string, from, to eventlog.Position, n int) (read func(pgx.BatchResults) (rebuilding bool, err error), err error) {
	args, err := advanceArgs(name, from, to, n)
	if err != nil {
		return nil, err
	}
	b.Queue(advanceSQL, args...)
	return func(br pgx.BatchResults) (bool, error) { return advanced(br.QueryRow(), name, from) }, nil
}

// advanceSQL moves the checkpoint $1 from $5/$6 to $2/$3, or fails (BL004, migration 0750) when it
// is not at $5/$6: a refusal must stop the transaction on the server, as a batch may send its COMMIT in
// the same pipeline before Go reads the answer.
const advanceSQL = `WITH moved AS (UPDATE projection_checkpoints
SET commit_position = $2, prepare_position = $3, events_applied = events_applied + $4, updated_at = now()
WHERE name = $1 AND commit_position = $5 AND prepare_position = $6
RETURNING rebuilding)
SELECT coalesce((SELECT rebuilding FROM moved), bl_checkpoint_moved($1))`

// checkpointMoved is the SQLSTATE of bl_checkpoint_moved.
const checkpointMoved = "BL004"

func advanceArgs(name string, from, to eventlog.Position, n int) ([]any, error) {
	oldC, oldP, err := positionArgs(from)
	if err != nil {
		return nil, err
	}
	newC, newP, err := positionArgs(to)
	if err != nil {
		return nil, err
	}
	return []any{name, newC, newP, n, oldC, oldP}, nil
}

func advanced(row pgx.Row, name string, from eventlog.Position) (rebuilding bool, err error) {
	err = row.Scan(&rebuilding)
	if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == checkpointMoved {
		return false, fmt.Errorf("checkpoint %s at %s: %w", name, from, projections.ErrCheckpointMoved)
	}
	if err != nil {
		return false, fmt.Errorf("save checkpoint %s: %w", name, err)
	}
	return rebuilding, nil
}

// Rewind moves name's checkpoint back to the start of the log within tx and sets its rebuilding flag.
func Rewind(ctx context.Context, tx pgx.Tx, name string, rebuilding bool) error {
	_, err := tx.Exec(ctx, `INSERT INTO projection_checkpoints (name, rebuilding) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET commit_position = 0, prepare_position = 0, events_applied = 0, rebuilding = $2, updated_at = now()`,
		name, rebuilding)
	if err != nil {
		return fmt.Errorf("rewind checkpoint %s: %w", name, err)
	}
	return nil
}

// EndRebuild clears name's rebuilding flag within tx: the rebuild has caught up with the log.
func EndRebuild(ctx context.Context, tx pgx.Tx, name string) error {
	if _, err := tx.Exec(ctx, `UPDATE projection_checkpoints SET rebuilding = false, updated_at = now() WHERE name = $1`, name); err != nil {
		return fmt.Errorf("end rebuild of %s: %w", name, err)
	}
	return nil
}

func positionArgs(p eventlog.Position) (int64, int64, error) {
	if p.Commit > math.MaxInt64 || p.Prepare > math.MaxInt64 {
		return 0, 0, fmt.Errorf("position %s does not fit the checkpoint columns", p)
	}
	return int64(p.Commit), int64(p.Prepare), nil
}
