package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/domain/eventlog"
	"bookingledger/projections"
)

// IdleFlush is how long the saved checkpoint of a projection may stay behind the batches it applied
// idly — batches that wrote nothing, so that only the checkpoint had to move (Keeper.Skip).
const IdleFlush = 200 * time.Millisecond

// Keeper keeps the checkpoint of a projection that applies its batches in a transaction of its own
// (Keeper.Apply) and has batches that write nothing (Keeper.Skip): the process projection without a
// step target, the relay without an endpoint. Such a batch moves the checkpoint in memory only; the
// saved row follows at most IdleFlush later, in one statement for every idle batch since, and at
// once when the runner caught up with the log (Flush, from Projection.CaughtUp) or the next batch
// writes. A default `serve` otherwise committed a row update per batch of each of those projections,
// which at one sender was one per delivery (ADR 0026).
//
// Events applied idly but not saved yet are applied again after a crash or a restart: idly again,
// or, when the projection has work by then (a target or an endpoint configured meanwhile), as the
// projection applies any batch — the relay under the endpoint rules in force when each event was
// recorded, the process projection planning those bookings' steps.
//
// The deferred write is fenced as every write of the checkpoint is (ErrCheckpointMoved: another
// runner moved it), and it is never made once the context of the batch that deferred it has ended:
// a runner's context ends when its lock is lost. A Keeper is used by one runner at a time.
type Keeper struct {
	pool  *pgxpool.Pool
	name  string
	begin string // BeginIndexed, or BeginGeneric (GenericPlans)

	mu      sync.Mutex
	saved   eventlog.Position // the row, as this runner last read or wrote it
	pos     eventlog.Position // applied: saved, then the idle batches since
	pending int               // events of those idle batches
	ctx     context.Context   // of the last idle batch: the deferred write does not outlive it
	timer   *time.Timer
	err     error // a deferred write that failed, returned by the next batch
}

// NewKeeper returns the keeper of name's checkpoint on pool.
func NewKeeper(pool *pgxpool.Pool, name string) *Keeper {
	return &Keeper{pool: pool, name: name, begin: BeginIndexed}
}

// GenericPlans makes Apply's transactions plan under GenericPlanning, and returns k.
func (k *Keeper) GenericPlans() *Keeper {
	k.begin = BeginGeneric
	return k
}

// Load reads the saved checkpoint (creating its row on first use) and forgets what was applied in
// memory only: the runner applies from there again.
func (k *Keeper) Load(ctx context.Context) (eventlog.Position, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.forget()
	pos, err := Load(ctx, k.pool, k.name)
	if err != nil {
		return eventlog.Position{}, err
	}
	k.saved, k.pos = pos, pos
	return pos, nil
}

// forget drops the idle batches not saved and a failed write.
func (k *Keeper) forget() {
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	k.pending, k.err, k.ctx = 0, nil, nil
	k.pos = k.saved
}

// Fresh returns the events after the position applied.
func (k *Keeper) Fresh(events []eventlog.RecordedEvent) []eventlog.RecordedEvent {
	k.mu.Lock()
	defer k.mu.Unlock()
	for len(events) > 0 && events[0].Position.Compare(k.pos) <= 0 {
		events = events[1:]
	}
	return events
}

// Skip records an idle batch of n events ending at last, applied in memory; the saved checkpoint
// follows within IdleFlush. It returns the failure of an earlier deferred write, if any (the runner
// then loads the checkpoint again).
func (k *Keeper) Skip(ctx context.Context, last eventlog.Position, n int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.err; err != nil {
		return err
	}
	k.pos, k.pending, k.ctx = last, k.pending+n, ctx
	if k.timer == nil {
		k.timer = time.AfterFunc(IdleFlush, k.flushLater)
	}
	return nil
}

// Apply runs f in a transaction that moves the checkpoint to last, counting n events and those of
// the idle batches not saved yet: all of it or nothing.
func (k *Keeper) Apply(ctx context.Context, last eventlog.Position, n int, f func(tx pgx.Tx) error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.err; err != nil {
		return err
	}
	err := pgx.BeginTxFunc(ctx, k.pool, pgx.TxOptions{BeginQuery: k.begin}, func(tx pgx.Tx) error {
		if _, err := Advance(ctx, tx, k.name, k.saved, last, n+k.pending); err != nil {
			return err
		}
		return f(tx)
	})
	if err != nil {
		return err
	}
	k.saved, k.pos, k.pending = last, last, 0
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	return nil
}

// Reset runs f (nil: nothing) in the transaction that moves the checkpoint back to the start of the
// log, and forgets the idle batches not saved.
func (k *Keeper) Reset(ctx context.Context, f func(tx pgx.Tx) error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	err := pgx.BeginFunc(ctx, k.pool, func(tx pgx.Tx) error {
		if f != nil {
			if err := f(tx); err != nil {
				return err
			}
		}
		return Rewind(ctx, tx, k.name, false)
	})
	if err != nil {
		return err
	}
	k.saved = eventlog.Position{}
	k.forget()
	return nil
}

// Flush saves the idle batches not saved yet, now.
func (k *Keeper) Flush(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return k.err
	}
	return k.flush(ctx)
}

func (k *Keeper) flush(ctx context.Context) error {
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	if k.pending == 0 {
		return nil
	}
	if _, err := AdvanceAlone(ctx, k.pool, k.name, k.saved, k.pos, k.pending); err != nil {
		return err
	}
	k.saved, k.pending = k.pos, 0
	return nil
}

// flushWait bounds a deferred write.
const flushWait = 5 * time.Second

// flushLater is the deferred write. A failure is kept for the next batch; one that may pass (the
// database not answering) is also tried again after IdleFlush.
func (k *Keeper) flushLater() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.timer = nil
	if k.pending == 0 || k.ctx == nil || k.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(k.ctx, flushWait)
	defer cancel()
	err := k.flush(ctx)
	if err == nil {
		return
	}
	k.err = fmt.Errorf("save the checkpoint of %s's idle batches: %w", k.name, err)
	if !errors.Is(err, projections.ErrCheckpointMoved) && k.ctx.Err() == nil {
		k.timer = time.AfterFunc(IdleFlush, k.retryLater)
	}
}

// retryLater tries a failed deferred write again.
func (k *Keeper) retryLater() {
	k.mu.Lock()
	k.err = nil
	k.mu.Unlock()
	k.flushLater()
}
