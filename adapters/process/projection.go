package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/projections"
)

// Name is the process projection's checkpoint and lock name.
const Name = "process"

// CalendarProjection is the projection the planner reads from and never runs ahead of.
const CalendarProjection = "calendar"

// Queue is the River queue of step jobs.
const Queue = "steps"

// Defaults.
const (
	DefaultMaxAttempts  = 10
	DefaultGatePoll     = 100 * time.Millisecond
	firstGatePoll       = 5 * time.Millisecond
	maxChainRounds      = 8
	maxInsertParamsRows = 1000
)

// StepArgs is the River job of one step: its id only; the step row is the record.
type StepArgs struct {
	Step int64 `json:"step"`
}

// Kind is River's name of the job. Stored in river_job rows: never rename it.
func (StepArgs) Kind() string { return "bookingledger.process_step" }

// ProjectionConfig configures the process projection.
type ProjectionConfig struct {
	Pool    *pgxpool.Pool
	Client  *river.Client[pgx.Tx]
	Targets Targets
	Logger  *slog.Logger
	// MaxAttempts of a step's job (DefaultMaxAttempts when zero).
	MaxAttempts int
	// GatePoll is how often, at most, a batch waiting for the calendar projection looks again (the
	// first looks come sooner).
	GatePoll time.Duration
}

// Projection is the process projection: a projections.Projection whose batches wait
// until the calendar projection has applied them, then plan in the transaction that moves the
// checkpoint.
type Projection struct {
	inner *checkpoint.Projection
	cfg   ProjectionConfig
}

var _ projections.Projection = (*Projection)(nil)

// NewProjection returns the projection. With no target configured it plans nothing but still keeps
// its checkpoint, so that configuring a target later does not act on the whole past at once: only
// bookings touched from then on are planned.
func NewProjection(cfg ProjectionConfig) (*Projection, error) {
	if cfg.Pool == nil || cfg.Client == nil {
		return nil, errors.New("process: pool and river client are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.GatePoll <= 0 {
		cfg.GatePoll = DefaultGatePoll
	}
	p := &Projection{cfg: cfg}
	inner, err := checkpoint.New(cfg.Pool, checkpoint.Config{Name: Name, Apply: p.apply})
	if err != nil {
		return nil, err
	}
	p.inner = inner
	return p, nil
}

// Name implements projections.Projection.
func (p *Projection) Name() string { return Name }

// Load implements projections.Projection.
func (p *Projection) Load(ctx context.Context) (eventlog.Position, error) { return p.inner.Load(ctx) }

// CaughtUp implements projections.Projection: nothing to finish.
func (p *Projection) CaughtUp(context.Context) error { return nil }

// Reset implements projections.Projection: only the checkpoint goes back. Steps are never deleted: the
// replay re-plans from the calendar's current state and finds every key it planned before.
func (p *Projection) Reset(ctx context.Context) error { return p.inner.Reset(ctx) }

// Apply implements projections.Projection. It first waits until the calendar projection has applied
// the batch's last event and is not rebuilding: steps are planned from calendar rows, which must
// already reflect the events (and must not be a rebuild's half-replayed past).
func (p *Projection) Apply(ctx context.Context, events []eventlog.RecordedEvent) error {
	if len(events) == 0 {
		return nil
	}
	last := events[len(events)-1].Position
	poll := min(firstGatePoll, p.cfg.GatePoll)
	for {
		pos, rebuilding, err := calendarCheckpoint(ctx, p.cfg.Pool)
		if err != nil {
			return err
		}
		if !rebuilding && pos.Compare(last) >= 0 {
			break
		}
		// The calendar is usually applying the same events right now: look again soon, then less
		// often (a rebuild of the calendar can take minutes).
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
		poll = min(2*poll, p.cfg.GatePoll)
	}
	return p.inner.Apply(ctx, events)
}

func calendarCheckpoint(ctx context.Context, pool *pgxpool.Pool) (eventlog.Position, bool, error) {
	var c, pr int64
	var rebuilding bool
	err := pool.QueryRow(ctx, `SELECT commit_position, prepare_position, rebuilding FROM projection_checkpoints WHERE name = $1`,
		CalendarProjection).Scan(&c, &pr, &rebuilding)
	if errors.Is(err, pgx.ErrNoRows) {
		return eventlog.Position{}, false, nil
	}
	if err != nil {
		return eventlog.Position{}, false, fmt.Errorf("process: read calendar checkpoint: %w", err)
	}
	return eventlog.Position{Commit: uint64(c), Prepare: uint64(pr)}, rebuilding, nil
}

func (p *Projection) apply(ctx context.Context, tx pgx.Tx, events []eventlog.RecordedEvent) error {
	if !p.cfg.Targets.Calendar && !p.cfg.Targets.Email {
		return nil
	}
	var touched []string
	for _, e := range events {
		if id, ok := booking.FromStream(e.StreamID); ok && !slices.Contains(touched, string(id)) {
			touched = append(touched, string(id))
		}
	}
	if len(touched) == 0 {
		return nil
	}
	ids, err := PlanBookings(ctx, tx, touched, p.cfg.Targets)
	if err != nil {
		return err
	}
	seats, err := planSeatCancellations(ctx, tx, events, p.cfg.Targets)
	if err != nil {
		return err
	}
	ids = append(ids, seats...)
	return InsertJobs(ctx, tx, p.cfg.Client, ids, p.cfg.MaxAttempts)
}

// InsertJobs inserts one job per step id in tx.
func InsertJobs(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], ids []int64, maxAttempts int) error {
	for len(ids) > 0 {
		n := min(len(ids), maxInsertParamsRows)
		params := make([]river.InsertManyParams, n)
		for i, id := range ids[:n] {
			params[i] = river.InsertManyParams{Args: StepArgs{Step: id}, InsertOpts: &river.InsertOpts{Queue: Queue, MaxAttempts: maxAttempts}}
		}
		if _, err := client.InsertManyTx(ctx, tx, params); err != nil {
			return fmt.Errorf("process: insert step jobs: %w", err)
		}
		ids = ids[n:]
	}
	return nil
}

// seriesOccurrencesSQL reads the bookings of the series $1. The non-empty test repeats the partial
// index's predicate.
const seriesOccurrencesSQL = `SELECT booking FROM calendar_bookings WHERE series = ANY($1) AND series <> ''`

type row struct {
	Booking
	from, to, series string
}

// PlanBookings plans every thread the bookings belong to, plus the threads of bookings that share a
// slot with them (a canceled holder hands its slot to a booking that had no event), inside tx. It
// returns the ids of steps that need a job (new or revived).
func PlanBookings(ctx context.Context, tx pgx.Tx, ids []string, targets Targets) ([]int64, error) {
	rows := map[string]row{}
	load := func(want []string) error {
		var missing []string
		for _, id := range want {
			if _, ok := rows[id]; !ok && id != "" && !slices.Contains(missing, id) {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		r, err := tx.Query(ctx, `SELECT booking, status, resources, lower(during), upper(during), rescheduled_from, rescheduled_to, series
FROM calendar_bookings WHERE booking = ANY($1)`, missing)
		if err != nil {
			return fmt.Errorf("process: read calendar rows: %w", err)
		}
		defer r.Close()
		for r.Next() {
			var b row
			var start, end *time.Time
			if err := r.Scan(&b.ID, &b.Status, &b.Resources, &start, &end, &b.from, &b.to, &b.series); err != nil {
				return fmt.Errorf("process: read calendar rows: %w", err)
			}
			if start != nil && end != nil {
				b.Start, b.End = start.UTC(), end.UTC()
			}
			rows[b.ID] = b
		}
		for _, id := range missing {
			if _, ok := rows[id]; !ok {
				rows[id] = row{Booking: Booking{ID: id}} // not in the calendar (payment stream, not yet projected)
			}
		}
		return r.Err()
	}
	if err := load(ids); err != nil {
		return nil, err
	}
	// Bookings whose claims overlap the touched bookings' slots on the same resources.
	var sharing []string
	if err := collect(ctx, tx, &sharing, `SELECT DISTINCT s.booking FROM calendar_bookings b
JOIN calendar_resources r ON r.resource = ANY(b.resources)
CROSS JOIN LATERAL bl_overlapping_claims(r.id, b.during) s(booking)
WHERE b.booking = ANY($1) AND b.during IS NOT NULL`, ids); err != nil {
		return nil, err
	}
	if err := load(sharing); err != nil {
		return nil, err
	}
	// The other occurrences of the touched bookings' series: a cancel of all remaining occurrences
	// arrives for one of them and cancels the others (projections.Recompute).
	var series []string
	for _, id := range ids {
		if s := rows[id].series; s != "" && !slices.Contains(series, s) {
			series = append(series, s)
		}
	}
	if len(series) > 0 {
		var occurrences []string
		if err := collect(ctx, tx, &occurrences, seriesOccurrencesSQL, series); err != nil {
			return nil, err
		}
		if err := load(occurrences); err != nil {
			return nil, err
		}
	}
	// Reschedule chains in both directions.
	for range maxChainRounds {
		var next []string
		for _, b := range rows {
			next = append(next, b.from, b.to)
		}
		before := len(rows)
		if err := load(next); err != nil {
			return nil, err
		}
		if len(rows) == before {
			break
		}
	}
	// Threads: chains from their root (no known predecessor).
	threads := map[string][]string{} // root → chain, root first
	for id := range rows {
		root := id
		for seen := 0; rows[root].from != "" && seen < 32; seen++ {
			root = rows[root].from
		}
		if _, ok := threads[root]; ok {
			continue
		}
		chain := []string{root}
		for cur := root; rows[cur].to != "" && len(chain) < 32; {
			cur = rows[cur].to
			chain = append(chain, cur)
		}
		threads[root] = chain
	}
	roots := make([]string, 0, len(threads))
	for r := range threads {
		roots = append(roots, r)
	}
	slices.Sort(roots)

	var members []string
	for _, r := range roots {
		members = append(members, threads[r]...)
	}
	existing, err := stepsOf(ctx, tx, `WHERE thread = ANY($1) OR booking = ANY($1) ORDER BY id FOR UPDATE`, members)
	if err != nil {
		return nil, err
	}
	// Every thread's writes go in one batch: one round trip for the whole plan, however many steps
	// (statement by statement, a batch of a hundred bookings took a second on a loaded machine).
	var jobs []int64
	batch := &pgx.Batch{}
	for _, root := range roots {
		chain := threads[root]
		var have []Step
		thread := ""
		for _, s := range existing {
			if slices.Contains(chain, s.Thread) || slices.Contains(chain, s.Booking) {
				if thread == "" {
					thread = s.Thread // a chain that grew at its start keeps the thread it began with
				}
				have = append(have, s)
			}
		}
		if thread == "" {
			thread = root
		}
		latest := rows[chain[len(chain)-1]].Booking
		queuePlan(batch, PlanThread(thread, latest, have, targets), &jobs)
	}
	if batch.Len() == 0 {
		return nil, nil
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("process: apply plan: %w", err)
	}
	return jobs, nil
}

// queuePlan queues plan's writes in b, in the plan's order; when b runs, the ids of steps that need a
// job are appended to jobs.
func queuePlan(b *pgx.Batch, plan Plan, jobs *[]int64) {
	collectID := func(row pgx.Row) error {
		var id int64
		err := row.Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // not revived / planned before: re-planning finds the key
		}
		if err == nil {
			*jobs = append(*jobs, id)
		}
		return err
	}
	for _, s := range plan.Skip {
		b.Queue(`UPDATE process_steps SET state = 'skipped', note = $2, finished_at = now(), updated_at = now()
WHERE key = $1 AND state = 'pending'`, s.Key, s.Note)
	}
	for _, k := range plan.Revive {
		b.Queue(`UPDATE process_steps SET state = 'pending', note = 'wanted again', finished_at = NULL, updated_at = now()
WHERE key = $1 AND state = 'skipped' AND attempts = 0 RETURNING id`, k).QueryRow(collectID)
	}
	for _, s := range plan.Insert {
		var after *uuid.UUID
		if s.After != uuid.Nil {
			after = &s.After
		}
		b.Queue(`INSERT INTO process_steps (key, kind, thread, booking, answers, after_key, resource, slot_start, slot_end)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (key) DO NOTHING RETURNING id`,
			s.Key, string(s.Kind), s.Thread, s.Booking, s.Answers, after, s.Resource, nullTime(s.Start), nullTime(s.End)).QueryRow(collectID)
	}
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func collect(ctx context.Context, q querier, out *[]string, sql string, args ...any) error {
	r, err := q.Query(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("process: query: %w", err)
	}
	v, err := pgx.CollectRows(r, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("process: query: %w", err)
	}
	*out = append(*out, v...)
	return nil
}

const stepColumns = `id, key, kind, thread, booking, state, answers, after_key, resource, slot_start, slot_end, attempts,
lease_until, target_href, target_etag, last_error, note, created_at, requested_at, finished_at, updated_at`

// qualifiedStepColumns are stepColumns of process_steps aliased s, for queries that join.
var qualifiedStepColumns = "s." + strings.ReplaceAll(strings.Join(strings.Fields(stepColumns), " "), ", ", ", s.")

func stepsOf(ctx context.Context, q querier, where string, args ...any) ([]Step, error) {
	r, err := q.Query(ctx, `SELECT `+stepColumns+` FROM process_steps `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("process: read steps: %w", err)
	}
	return scanSteps(r)
}

// scanSteps reads rows of stepColumns, each followed by the columns scanned into extra (the values
// of the last row remain in extra), and closes r.
func scanSteps(r pgx.Rows, extra ...any) ([]Step, error) {
	defer r.Close()
	var out []Step
	for r.Next() {
		var s Step
		var kind, state string
		var after *uuid.UUID
		var start, end, lease, req, fin *time.Time
		dest := append([]any{&s.ID, &s.Key, &kind, &s.Thread, &s.Booking, &state, &s.Answers, &after, &s.Resource, &start, &end,
			&s.Attempts, &lease, &s.Href, &s.ETag, &s.LastError, &s.Note, &s.CreatedAt, &req, &fin, &s.UpdatedAt}, extra...)
		if err := r.Scan(dest...); err != nil {
			return nil, fmt.Errorf("process: read steps: %w", err)
		}
		s.Kind, s.State = Kind(kind), State(state)
		if after != nil {
			s.After = *after
		}
		s.Start, s.End, s.LeaseUntil, s.RequestedAt, s.FinishedAt = deref(start), deref(end), deref(lease), deref(req), deref(fin)
		out = append(out, s)
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("process: read steps: %w", err)
	}
	return out, nil
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
