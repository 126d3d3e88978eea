package checkpoint

import (
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/projections"
)

var _ projections.Locker = (*Locker)(nil)

// defaultLockCheck is how often a held lock's connection is checked. A dead session releases the lock
// on the server; until the holder notices, the checkpoint compare-and-set in every Apply keeps a
// second runner from committing over it.
const defaultLockCheck = time.Second

// Locker elects one runner per projection with a session-level PostgreSQL advisory lock. A held lock
// lives on a connection taken out of the pool for good, so it is never handed to other work; a standby
// borrows a pool connection for each attempt and gives it back.
type Locker struct {
	pool  *pgxpool.Pool
	check time.Duration
}

// NewLocker returns a locker on pool's database.
func NewLocker(pool *pgxpool.Pool) *Locker {
	return &Locker{pool: pool, check: defaultLockCheck}
}

// LockKey is the advisory-lock key of a projection: FNV-1a of its name in a bookingledger namespace.
// Operators find the holder with
// SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND ((classid::bigint << 32) | objid::bigint) = <key>.
func LockKey(name string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("bookingledger.projection." + name))
	return int64(h.Sum64())
}

// TryAcquire implements projections.Locker.
func (l *Locker) TryAcquire(ctx context.Context, name string) (projections.Lease, error) {
	key := LockKey(name)
	pc, err := l.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	var ok bool
	if err := pc.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil {
		pc.Release()
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if !ok {
		pc.Release() // holds nothing: safe to reuse
		return nil, nil
	}
	le := &lease{conn: pc.Hijack(), key: key, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go le.watch(l.check)
	return le, nil
}

type lease struct {
	conn     *pgx.Conn
	key      int64
	lost     chan struct{}
	lostOnce sync.Once
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
}

func (le *lease) Lost() <-chan struct{} { return le.lost }

// watch is the only user of conn until Release has stopped it.
func (le *lease) watch(every time.Duration) {
	defer close(le.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-le.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := le.conn.Exec(ctx, `SELECT 1`)
		cancel()
		if err != nil {
			le.lostOnce.Do(func() { close(le.lost) })
			return
		}
	}
}

func (le *lease) Release(ctx context.Context) {
	le.stopOnce.Do(func() { close(le.stop) })
	<-le.done
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if !le.conn.IsClosed() {
		_, _ = le.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, le.key)
	}
	_ = le.conn.Close(ctx) // ending the session releases the lock in any case
	le.lostOnce.Do(func() { close(le.lost) })
}
