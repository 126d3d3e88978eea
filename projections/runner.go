package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"bookingledger/domain/eventlog"
)

// ErrLeaseLost: the runner's lock was lost (its connection died); it stops applying and tries to take
// the lock again.
var ErrLeaseLost = errors.New("projection lock lost")

// ErrBusy: another process runs the projection (holds its lock), so this one cannot rebuild it.
var ErrBusy = errors.New("projection is run by another process")

// ErrCheckpointMoved: the saved checkpoint is not where this runner left it, so another runner wrote
// it. The batch is rolled back; the runner reloads the checkpoint.
var ErrCheckpointMoved = errors.New("projection checkpoint moved by another runner")

// Projection is a read model fed by the runner.
type Projection interface {
	// Name identifies the projection: its checkpoint row and its lock.
	Name() string
	// Load returns the saved checkpoint and drops any in-memory state: it is called whenever the
	// runner (re)starts applying, after it took the lock.
	Load(ctx context.Context) (eventlog.Position, error)
	// Apply applies events, which follow the last applied position in global order, and saves the
	// position of the last one as the checkpoint in the same transaction: all of it or nothing.
	Apply(ctx context.Context, events []eventlog.RecordedEvent) error
	// CaughtUp is called whenever a catch-up reached the end of the log (to finish a rebuild, or to
	// pick up state that has no events, such as quarantined receipts); most projections do nothing.
	CaughtUp(ctx context.Context) error
	// Reset empties the read model and moves the checkpoint back to the start of the log, atomically:
	// the start of a rebuild.
	Reset(ctx context.Context) error
}

// Bulk is a projection's capability to load a replay from the start of the log at once instead of
// batch by batch (a runner given one uses it whenever it applies from the start: a rebuild, or a first
// run over an existing log).
type Bulk interface {
	// Buffer takes the next events of such a replay without making them visible.
	Buffer(ctx context.Context, events []eventlog.RecordedEvent) error
	// Flush writes everything buffered and its checkpoint in one transaction, and ends a rebuild.
	Flush(ctx context.Context) error
}

// BulkFrom is a Bulk that can also take a replay's events from the store itself (a read model in the
// event store's database copies them there), so that they are never read out only to be written
// back: the runner then only says where to start.
type BulkFrom interface {
	Bulk
	// BufferFrom buffers, as Buffer would, every event ReadAll would return after from, as of now, and
	// returns how many there were and the position of the last (from when none). ok is false, and
	// nothing happened, when it cannot take them from the store: the runner then reads them and calls
	// Buffer.
	BufferFrom(ctx context.Context, from eventlog.Position) (n int64, last eventlog.Position, ok bool, err error)
}

// Counter is a store that counts the events after a position, up to limit, without reading them
// (the PostgreSQL store): a rebuild's progress asks it for the total instead of reading the whole log
// once more.
type Counter interface {
	EventsAfter(ctx context.Context, from eventlog.Position, limit int64) (int64, error)
}

// Locker elects the one active runner of a projection among processes.
type Locker interface {
	// TryAcquire takes the projection's lock without waiting. It returns a nil Lease (and no error)
	// when another process holds it.
	TryAcquire(ctx context.Context, name string) (Lease, error)
}

// Lease is a held lock.
type Lease interface {
	// Lost is closed when the lock can no longer be trusted (its session ended).
	Lost() <-chan struct{}
	// Release gives the lock up.
	Release(ctx context.Context)
}

// Progress of a rebuild: events replayed and the events in the log when it started (at least Done).
type Progress struct {
	Done  int64
	Total int64
}

// RunnerOptions tune a runner; zero values take the defaults.
type RunnerOptions struct {
	// BatchSize is how many events one catch-up read fetches and one transaction applies (1000).
	BatchSize int
	// LiveBatch bounds the events applied in one transaction while following live (500).
	LiveBatch int
	// PollInterval is the wait between reads when the store cannot push events (200ms).
	PollInterval time.Duration
	// StandbyInterval is how often a standby runner tries to take the lock (2s).
	StandbyInterval time.Duration
	// RetryInterval is the first wait after a failure; it doubles up to MaxRetryInterval (500ms, 30s).
	RetryInterval    time.Duration
	MaxRetryInterval time.Duration
	Logger           *slog.Logger
	// Subscriber, when set, delivers new events once caught up (the store's own subscription);
	// without one the runner polls ReadAll.
	Subscriber eventlog.Subscriber
	// Bulk, when set, loads replays from the start of the log (see Bulk); without it they go
	// through Apply like any batch.
	Bulk Bulk
}

func (o RunnerOptions) withDefaults() RunnerOptions {
	orDefault(&o.BatchSize, 1000)
	orDefault(&o.LiveBatch, 500)
	orDefault(&o.PollInterval, 200*time.Millisecond)
	orDefault(&o.StandbyInterval, 2*time.Second)
	orDefault(&o.RetryInterval, 500*time.Millisecond)
	orDefault(&o.MaxRetryInterval, 30*time.Second)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// orDefault sets *v to d unless it is positive.
func orDefault[T int | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// RunnerStatus is a snapshot of a runner for health checks and operators.
type RunnerStatus struct {
	Projection string
	// Active is true while this process holds the lock and applies events; false on a standby.
	Active    bool
	Position  eventlog.Position
	Applied   int64 // events applied by this process
	LastApply time.Time
	LastError string
}

// Runner feeds one projection from the global log.
type Runner struct {
	store eventlog.Store
	proj  Projection
	lock  Locker
	opts  RunnerOptions

	mu     sync.Mutex
	status RunnerStatus
}

// NewRunner returns a runner of proj over store, elected by lock.
func NewRunner(store eventlog.Store, proj Projection, lock Locker, opts RunnerOptions) *Runner {
	return &Runner{store: store, proj: proj, lock: lock, opts: opts.withDefaults(),
		status: RunnerStatus{Projection: proj.Name()}}
}

// Status returns a snapshot of the runner.
func (r *Runner) Status() RunnerStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

func (r *Runner) update(f func(*RunnerStatus)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.status)
}

// Run applies the log to the projection until ctx ends: it waits as a standby while another process
// holds the projection's lock, catches up from the saved checkpoint when it gets the lock, then follows
// new events (RunnerOptions.Subscriber when set, else polling ReadAll). Failures
// and a lost lock are retried with backoff; Run returns only ctx.Err().
func (r *Runner) Run(ctx context.Context) error {
	log := r.opts.Logger.With("projection", r.proj.Name())
	wait := r.opts.RetryInterval
	standby := false
	for {
		progressed := false
		err := r.withLease(ctx, func(ctx context.Context) error {
			standby = false
			log.Info("projection lock taken; applying")
			return r.toEnd(ctx, false, true, func(int) { progressed = true })
		})
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrBusy):
			if !standby {
				log.Info("projection runs in another process; standing by")
				standby = true
			}
			if eventlog.Sleep(ctx, r.opts.StandbyInterval) != nil {
				return ctx.Err()
			}
			continue
		}
		if progressed {
			wait = r.opts.RetryInterval
		}
		log.Warn("projection stopped; retrying", "error", err, "wait", wait)
		r.update(func(s *RunnerStatus) { s.LastError = err.Error() })
		if eventlog.Sleep(ctx, wait) != nil {
			return ctx.Err()
		}
		wait = min(2*wait, r.opts.MaxRetryInterval)
	}
}

// catchUp applies batches of ReadAll from pos until a read comes back short. While a full batch is
// applied, the next one is already being read, so the store's work and the projection's overlap. From
// the start of the log it loads through RunnerOptions.Bulk when there is one — from the store itself
// when the Bulk is a BulkFrom that can — and flushes what it buffered at the end (always when rebuild: the write ends the rebuild, even of an empty log).
func (r *Runner) catchUp(ctx context.Context, pos eventlog.Position, rebuild bool, onBatch func(int)) (eventlog.Position, error) {
	bulk, buffered := r.opts.Bulk, false
	if pos != (eventlog.Position{}) {
		bulk = nil
	}
	flush := func() error {
		if bulk == nil || !buffered && !rebuild {
			return nil
		}
		if err := bulk.Flush(ctx); err != nil {
			return fmt.Errorf("write the replay of %s: %w", r.proj.Name(), err)
		}
		return nil
	}
	if from, ok := bulk.(BulkFrom); ok {
		for {
			n, last, ok, err := from.BufferFrom(ctx, pos)
			if err != nil {
				return pos, fmt.Errorf("buffer the replay of %s from %s: %w", r.proj.Name(), pos, err)
			}
			if !ok {
				break
			}
			if n == 0 { // the events written meanwhile, if any, were taken too
				return pos, flush()
			}
			buffered, pos = true, last
			r.appliedTo(last, n)
			onBatch(int(n))
		}
	}
	type read struct {
		events []eventlog.RecordedEvent
		err    error
	}
	fetch := func(from eventlog.Position) <-chan read {
		ch := make(chan read, 1) // buffered: an abandoned read-ahead never blocks its goroutine
		go func() {
			events, err := r.store.ReadAll(ctx, from, r.opts.BatchSize)
			ch <- read{events, err}
		}()
		return ch
	}
	next := fetch(pos)
	for {
		var res read
		select {
		case res = <-next:
		case <-ctx.Done():
			return pos, ctx.Err()
		}
		if res.err != nil {
			return pos, fmt.Errorf("read log from %s: %w", pos, res.err)
		}
		events := res.events
		if len(events) == 0 {
			return pos, flush()
		}
		full := len(events) >= r.opts.BatchSize
		if full {
			next = fetch(events[len(events)-1].Position)
		}
		if bulk != nil {
			if err := bulk.Buffer(ctx, events); err != nil {
				return pos, fmt.Errorf("buffer %d events of the replay of %s: %w", len(events), r.proj.Name(), err)
			}
			buffered = true
			r.applied(events)
		} else if err := r.apply(ctx, events); err != nil {
			return pos, err
		}
		pos = events[len(events)-1].Position
		onBatch(len(events))
		if !full {
			return pos, flush()
		}
	}
}

func (r *Runner) apply(ctx context.Context, events []eventlog.RecordedEvent) error {
	if err := r.proj.Apply(ctx, events); err != nil {
		last := events[len(events)-1].Position
		return fmt.Errorf("apply %d events up to %s to %s: %w", len(events), last, r.proj.Name(), err)
	}
	r.applied(events)
	return nil
}

func (r *Runner) applied(events []eventlog.RecordedEvent) {
	r.appliedTo(events[len(events)-1].Position, int64(len(events)))
}

// appliedTo records that n more events were applied, up to last.
func (r *Runner) appliedTo(last eventlog.Position, n int64) {
	now := time.Now()
	r.update(func(s *RunnerStatus) {
		s.Position, s.Applied, s.LastApply, s.LastError = last, s.Applied+n, now, ""
	})
}

// live follows the subscription; a goroutine applies what the subscription hands over in batches, so
// a burst becomes one transaction instead of one per event.
func (r *Runner) live(parent context.Context, sub eventlog.Subscriber, from eventlog.Position, onBatch func(int)) error {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	ch := make(chan eventlog.RecordedEvent, r.opts.LiveBatch)
	applied := make(chan error, 1)
	go func() {
		err := r.applyLive(ctx, ch, onBatch)
		cancel(err) // a failure ends the subscription; without one, it has ended or ctx has
		applied <- err
	}()
	serr := sub.Subscribe(ctx, from, func(e eventlog.RecordedEvent) error {
		select {
		case ch <- e:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	close(ch)
	if aerr := <-applied; aerr != nil {
		return aerr
	}
	return fmt.Errorf("subscription of %s ended: %w", r.proj.Name(), serr)
}

func (r *Runner) applyLive(ctx context.Context, ch <-chan eventlog.RecordedEvent, onBatch func(int)) error {
	for {
		var batch []eventlog.RecordedEvent
		select {
		case e, ok := <-ch:
			if !ok {
				return nil
			}
			batch = append(batch, e)
		case <-ctx.Done():
			return nil
		}
		// What queued meanwhile joins the batch; only this goroutine receives, so none of these blocks.
		for len(batch) < r.opts.LiveBatch && len(ch) > 0 {
			batch = append(batch, <-ch)
		}
		if err := r.apply(ctx, batch); err != nil {
			return err
		}
		onBatch(len(batch))
	}
}

// CatchUp applies everything the log holds now and returns how many events it applied. It takes the
// projection's lock for the duration and fails with ErrBusy when another process holds it. Tests and
// one-shot commands use it; servers use Run.
func (r *Runner) CatchUp(ctx context.Context) (int64, error) {
	var n int64
	err := r.withLease(ctx, func(ctx context.Context) error {
		return r.toEnd(ctx, false, false, func(k int) { n += int64(k) })
	})
	return n, err
}

// Rebuild empties the projection, resets its checkpoint and replays the whole log, reporting progress
// after every batch (progress may be nil). It holds the projection's lock throughout and fails with
// ErrBusy when another process (a running `serve`) holds it. An interrupted rebuild is finished by the
// next runner that takes the lock: it resumes from the checkpoint the rebuild reached.
func (r *Runner) Rebuild(ctx context.Context, progress func(Progress)) error {
	return r.withLease(ctx, func(ctx context.Context) error {
		var total, done int64
		if progress != nil {
			var err error
			if total, err = r.count(ctx); err != nil {
				return fmt.Errorf("rebuild %s: count events: %w", r.proj.Name(), err)
			}
			progress(Progress{Total: total})
		}
		if err := r.proj.Reset(ctx); err != nil {
			return fmt.Errorf("rebuild %s: reset: %w", r.proj.Name(), err)
		}
		err := r.toEnd(ctx, true, false, func(n int) {
			done += int64(n)
			if progress != nil {
				progress(Progress{Done: done, Total: max(total, done)})
			}
		})
		if err != nil {
			return fmt.Errorf("rebuild %s: %w", r.proj.Name(), err)
		}
		return nil
	})
}

// toEnd applies the log from the saved checkpoint to its end and reports the projection caught up;
// with follow it goes on with new events until ctx ends or applying fails.
func (r *Runner) toEnd(ctx context.Context, rebuild, follow bool, onBatch func(int)) error {
	pos, err := r.proj.Load(ctx)
	if err != nil {
		return fmt.Errorf("load checkpoint of %s: %w", r.proj.Name(), err)
	}
	r.update(func(s *RunnerStatus) { s.Position = pos })
	for {
		if pos, err = r.catchUp(ctx, pos, rebuild, onBatch); err != nil {
			return err
		}
		if err := r.proj.CaughtUp(ctx); err != nil {
			return fmt.Errorf("%s caught up: %w", r.proj.Name(), err)
		}
		switch sub := r.opts.Subscriber; {
		case !follow:
			return nil
		case sub != nil:
			return r.live(ctx, sub, pos, onBatch)
		}
		if err := eventlog.Sleep(ctx, r.opts.PollInterval); err != nil {
			return err
		}
	}
}

// withLease runs f while holding the projection's lock (ErrBusy when another process holds it), with
// a context that ends when the lock is lost.
func (r *Runner) withLease(parent context.Context, f func(context.Context) error) error {
	lease, err := r.lock.TryAcquire(parent, r.proj.Name())
	if err != nil {
		return fmt.Errorf("take lock of %s: %w", r.proj.Name(), err)
	}
	if lease == nil {
		return fmt.Errorf("%s: %w", r.proj.Name(), ErrBusy)
	}
	defer lease.Release(context.WithoutCancel(parent))
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	go func() {
		select {
		case <-lease.Lost():
			cancel(ErrLeaseLost)
		case <-ctx.Done():
		}
	}()
	r.update(func(s *RunnerStatus) { s.Active = true })
	defer r.update(func(s *RunnerStatus) { s.Active = false })
	if err := f(ctx); err != nil {
		if c := context.Cause(ctx); c != nil && ctx.Err() != nil && parent.Err() == nil {
			return fmt.Errorf("%w (%w)", err, c)
		}
		return err
	}
	return nil
}

func (r *Runner) count(ctx context.Context) (int64, error) {
	if c, ok := r.store.(Counter); ok {
		return c.EventsAfter(ctx, eventlog.Position{}, math.MaxInt64)
	}
	const countBatch = 10000
	var (
		n   int64
		pos eventlog.Position
	)
	for {
		events, err := r.store.ReadAll(ctx, pos, countBatch)
		if err != nil {
			return 0, err
		}
		n += int64(len(events))
		if len(events) < countBatch {
			return n, nil
		}
		pos = events[len(events)-1].Position
	}
}
