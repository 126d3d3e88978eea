package stepstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/process"
	"bookingledger/domain/eventlog"
	"bookingledger/projections"
	"bookingledger/projections/steps"
)

// ProjectionName is the process projection's checkpoint and lock name.
const ProjectionName = "process"

// Defaults.
const (
	DefaultGatePoll = 100 * time.Millisecond
	firstGatePoll   = 5 * time.Millisecond
	maxChainRounds  = 8
)

// CalendarReader is what the projection reads of the calendar projection, whose tables only their
// package names (readmodel.StepReader implements it). The reads that take tx run in the batch's
// transaction.
type CalendarReader interface {
	// Checkpoint is the calendar's saved position, and whether it is rebuilding.
	Checkpoint(ctx context.Context) (eventlog.Position, bool, error)
	// Rows returns the calendar rows of those of ids the calendar has.
	Rows(ctx context.Context, tx pgx.Tx, ids []string) ([]steps.Row, error)
	// Sharing returns the bookings whose claims overlap the slots of ids on the same resources.
	Sharing(ctx context.Context, tx pgx.Tx, ids []string) ([]string, error)
	// Occurrences returns the bookings of the series.
	Occurrences(ctx context.Context, tx pgx.Tx, series []string) ([]string, error)
}

// ProjectionConfig configures the process projection.
type ProjectionConfig struct {
	Pool     *pgxpool.Pool
	Calendar CalendarReader
	Client   *river.Client[pgx.Tx]
	Targets  process.Targets
	Logger   *slog.Logger
	// MaxAttempts of a step's job (process.DefaultMaxAttempts when zero).
	MaxAttempts int
	// GatePoll is how often, at most, a batch waiting for the calendar projection looks again (the
	// first looks come sooner).
	GatePoll time.Duration
	// CalendarAdvanced, when set, returns a channel closed when the calendar projection of this
	// process next commits (readmodel.ReadModel.Advanced): a waiting batch looks again then, not only
	// at its next poll, which stays for a calendar run by another process.
	CalendarAdvanced func() <-chan struct{}
}

// Projection is the process projection, shaped as the calendar's (readmodel.ReadModel): it keeps
// its own checkpoint row, and each batch waits until the calendar projection has applied it, then
// plans (projections/steps) in the transaction that moves the checkpoint. Apply, Load and Reset are
// called by one runner at a time.
type Projection struct {
	cfg  ProjectionConfig
	keep *checkpoint.Keeper

	mu sync.Mutex
}

var _ projections.Projection = (*Projection)(nil)

// NewProjection returns the projection. With no target configured it plans nothing but still keeps
// its checkpoint, so that configuring a target later does not act on the whole past at once: only
// bookings touched from then on are planned.
func NewProjection(cfg ProjectionConfig) (*Projection, error) {
	if cfg.Pool == nil || cfg.Calendar == nil || cfg.Client == nil {
		return nil, errors.New("process: pool, calendar reader and river client are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = process.DefaultMaxAttempts
	}
	if cfg.GatePoll <= 0 {
		cfg.GatePoll = DefaultGatePoll
	}
	return &Projection{cfg: cfg, keep: checkpoint.NewKeeper(cfg.Pool, ProjectionName).GenericPlans()}, nil
}

// Name implements projections.Projection.
func (p *Projection) Name() string { return ProjectionName }

// Load implements projections.Projection: it creates the checkpoint row on first use.
func (p *Projection) Load(ctx context.Context) (eventlog.Position, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keep.Load(ctx)
}

// CaughtUp implements projections.Projection: the checkpoint of the batches without a target to
// plan for is saved now (checkpoint.Keeper).
func (p *Projection) CaughtUp(ctx context.Context) error { return p.keep.Flush(ctx) }

// Reset implements projections.Projection: only the checkpoint goes back. Steps are never deleted: the
// replay re-plans from the calendar's current state and finds every key it planned before.
func (p *Projection) Reset(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.keep.Reset(ctx, nil); err != nil {
		return fmt.Errorf("reset %s: %w", ProjectionName, err)
	}
	return nil
}

// Apply implements projections.Projection. It first waits until the calendar projection has applied
// the batch's last event and is not rebuilding: steps are planned from calendar rows, which must
// already reflect the events (and must not be a rebuild's half-replayed past). Events at or before
// the position applied are skipped; the plan and the checkpoint commit together. With no target
// configured there is nothing to plan: the checkpoint moves alone, without waiting for the calendar,
// saved within checkpoint.IdleFlush (checkpoint.Keeper).
func (p *Projection) Apply(ctx context.Context, events []eventlog.RecordedEvent) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	fresh := p.keep.Fresh(events)
	if len(fresh) == 0 {
		return nil
	}
	last := fresh[len(fresh)-1].Position
	if !p.cfg.Targets.Calendar && !p.cfg.Targets.Email {
		return p.keep.Skip(ctx, last, len(fresh))
	}
	if err := p.awaitCalendar(ctx, last); err != nil {
		return err
	}
	return p.keep.Apply(ctx, last, len(fresh), func(tx pgx.Tx) error { return p.plan(ctx, tx, fresh) })
}

// awaitCalendar returns once the calendar has applied last and is not rebuilding.
func (p *Projection) awaitCalendar(ctx context.Context, last eventlog.Position) error {
	poll := min(firstGatePoll, p.cfg.GatePoll)
	for {
		var advanced <-chan struct{} // taken before the look, so that a commit after it is not missed
		if p.cfg.CalendarAdvanced != nil {
			advanced = p.cfg.CalendarAdvanced()
		}
		pos, rebuilding, err := p.cfg.Calendar.Checkpoint(ctx)
		if err != nil {
			return fmt.Errorf("process: read calendar checkpoint: %w", err)
		}
		if !rebuilding && pos.Compare(last) >= 0 {
			return nil
		}
		// The calendar is usually applying the same events right now: look again soon, then less
		// often (a rebuild of the calendar can take minutes).
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-advanced:
		case <-time.After(poll):
		}
		poll = min(2*poll, p.cfg.GatePoll)
	}
}

func (p *Projection) plan(ctx context.Context, tx pgx.Tx, events []eventlog.RecordedEvent) error {
	if !p.cfg.Targets.Calendar && !p.cfg.Targets.Email {
		return nil
	}
	touched := steps.Touched(events)
	if len(touched) == 0 {
		return nil
	}
	ids, err := PlanBookings(ctx, tx, p.cfg.Calendar, touched, p.cfg.Targets)
	if err != nil {
		return err
	}
	return process.InsertJobs(ctx, tx, p.cfg.Client, ids, p.cfg.MaxAttempts)
}

// PlanBookings plans every thread the bookings belong to, plus the threads of bookings that share a
// slot with them (a canceled holder hands its slot to a booking that had no event) or a series, and
// the cancellations of the seats that left those of them that are seated (steps.SeatCancellations:
// from each booking's whole state, not from the batch), inside tx, reading the calendar through cal.
// It returns the jobs of the steps that need one (new or revived).
func PlanBookings(ctx context.Context, tx pgx.Tx, cal CalendarReader, ids []string, targets process.Targets) ([]process.StepArgs, error) {
	rows := steps.Rows{}
	load := func(want []string) error {
		missing := rows.Missing(want)
		if len(missing) == 0 {
			return nil
		}
		read, err := cal.Rows(ctx, tx, missing)
		if err != nil {
			return fmt.Errorf("process: read calendar rows: %w", err)
		}
		rows.Add(missing, read)
		return nil
	}
	if err := load(ids); err != nil {
		return nil, err
	}
	sharing, err := cal.Sharing(ctx, tx, ids)
	if err != nil {
		return nil, fmt.Errorf("process: read bookings sharing slots: %w", err)
	}
	if err := load(sharing); err != nil {
		return nil, err
	}
	if series := rows.Series(ids); len(series) > 0 {
		occurrences, err := cal.Occurrences(ctx, tx, series)
		if err != nil {
			return nil, fmt.Errorf("process: read series: %w", err)
		}
		if err := load(occurrences); err != nil {
			return nil, err
		}
	}
	for range maxChainRounds { // reschedule chains in both directions
		before := len(rows)
		if err := load(rows.Chained()); err != nil {
			return nil, err
		}
		if len(rows) == before {
			break
		}
	}
	threads := rows.Threads()
	existing, err := stepsOf(ctx, tx, `WHERE thread = ANY($1) OR booking = ANY($1) ORDER BY id FOR UPDATE`, steps.Members(threads))
	if err != nil {
		return nil, err
	}
	// Every thread's writes go in one batch: one round trip for the whole plan, however many steps
	// (statement by statement, a batch of a hundred bookings took a second on a loaded machine).
	var jobs []process.StepArgs
	batch := &pgx.Batch{}
	planned := plannerSteps(existing)
	for _, plan := range steps.PlanThreads(threads, rows, planned, targets) {
		queuePlan(batch, plan, &jobs)
	}
	if targets.Email {
		queuePlan(batch, steps.SeatCancellations(rows, planned), &jobs)
	}
	if batch.Len() == 0 {
		return nil, nil
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("process: apply plan: %w", err)
	}
	return jobs, nil
}
