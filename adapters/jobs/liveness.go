package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// livenessLockClass is the first key of each instance's advisory lock (the second is its
// job_instances.id). Operators find live instances with
// SELECT i.client_id, l.pid FROM job_instances i JOIN pg_locks l ON l.locktype = 'advisory'
// AND l.classid = 1651 AND l.objid = i.id::oid AND l.objsubid = 2 AND l.database =
// (SELECT oid FROM pg_database WHERE datname = current_database()).
// Advisory locks belong to a database: other databases of the cluster hold the same keys.
const livenessLockClass = 1651

// Defaults of the liveness check.
const (
	// DefaultLivenessInterval is how often an instance checks its lock's session and looks for dead
	// instances: a dead one's jobs run again within about this long of its death.
	DefaultLivenessInterval = time.Second
	// DefaultOrphanGrace is how long one of this instance's own jobs may stay running in the database
	// while no worker of it runs the job (it returned, and River could not record the result, e.g.
	// the database was away) before it is put back. It covers River's asynchronous completion.
	DefaultOrphanGrace = 10 * time.Second
)

// ErrNotRegistered is returned by Liveness methods that need a registered instance.
var ErrNotRegistered = errors.New("jobs: instance not registered")

// Rescued is what one liveness check put back: the dead instances' client ids, and each job made
// available again with the client id whose attempt it was.
type Rescued struct {
	Dead []string
	Jobs []RescuedJob
}

// RescuedJob is one job put back.
type RescuedJob struct {
	ID     int64
	Kind   string
	Args   []byte
	Client string
}

// RescueHook runs in the transaction that puts jobs back: kinds with leases of their own (process
// steps) end the leases the dead attempts held, so the next attempt need not wait them out.
type RescueHook func(ctx context.Context, tx pgx.Tx, r Rescued) error

// Liveness makes the work of a dead instance resume in seconds. Each instance registers its River
// client id (recorded in river_job.attempted_by) and holds a session-level advisory lock on a
// connection of its own; PostgreSQL drops the lock when that session ends (the process died, or lost
// its connection). Every instance checks each second for registered instances whose lock nobody
// holds and puts their running jobs back, and puts back its own jobs that the database says are
// running while no worker of it runs them (a result River could not record during an outage).
// River's own rescue, after a fixed delay, stays as the backstop for a session PostgreSQL has not
// seen end yet (a host that vanished from the network: TCP keepalive decides).
type Liveness struct {
	pool     *pgxpool.Pool
	id       string
	log      *slog.Logger
	hooks    []RescueHook
	interval time.Duration
	grace    time.Duration

	mu       sync.Mutex
	inflight map[int64]int       // job id → attempts of it running here
	exited   map[int64]time.Time // job id → when its last attempt here returned
	conn     *pgx.Conn
	stop     chan struct{}
	done     chan struct{}
}

// NewClientID returns a River client id unique to this process: host, pid and a random part.
func NewClientID() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// NewLiveness returns the check of the instance clientID (NewClientID when empty). Hooks run in the
// rescue's transaction.
func NewLiveness(pool *pgxpool.Pool, clientID string, log *slog.Logger, hooks ...RescueHook) *Liveness {
	if clientID == "" {
		clientID = NewClientID()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Liveness{pool: pool, id: clientID, log: log, hooks: hooks, interval: DefaultLivenessInterval,
		grace: DefaultOrphanGrace, inflight: map[int64]int{}, exited: map[int64]time.Time{}}
}

// SetTiming changes the check interval and the orphan grace (tests); zero keeps a value.
func (l *Liveness) SetTiming(interval, grace time.Duration) {
	if interval > 0 {
		l.interval = interval
	}
	if grace > 0 {
		l.grace = grace
	}
}

// ID is the instance's River client id.
func (l *Liveness) ID() string { return l.id }

// Middleware tracks which jobs this instance's workers are running, for the orphan check.
func (l *Liveness) Middleware() rivertype.WorkerMiddleware { return &livenessMiddleware{l: l} }

type livenessMiddleware struct {
	river.MiddlewareDefaults
	l *Liveness
}

func (m *livenessMiddleware) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	l := m.l
	l.mu.Lock()
	l.inflight[job.ID]++
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		if l.inflight[job.ID]--; l.inflight[job.ID] <= 0 {
			delete(l.inflight, job.ID)
		}
		l.exited[job.ID] = time.Now()
		l.mu.Unlock()
	}()
	return doInner(ctx)
}

// Register records the instance and takes its lock, in one transaction on a connection of its own,
// so that no other instance ever sees the row without the lock held. It replaces an earlier
// registration of the same id (after a lost connection).
func (l *Liveness) Register(ctx context.Context) error {
	l.mu.Lock()
	old := l.conn
	l.conn = nil
	l.mu.Unlock()
	if old != nil {
		_ = old.Close(context.WithoutCancel(ctx))
	}
	conn, err := pgx.ConnectConfig(ctx, l.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("jobs: liveness: connect: %w", err)
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var id int32
		if err := tx.QueryRow(ctx, `INSERT INTO job_instances (client_id) VALUES ($1)
ON CONFLICT (client_id) DO UPDATE SET started_at = now() RETURNING id`, l.id).Scan(&id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, livenessLockClass, id)
		return err
	})
	if err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("jobs: liveness: register %s: %w", l.id, err)
	}
	l.mu.Lock()
	l.conn = conn
	l.mu.Unlock()
	return nil
}

// Start registers the instance and checks every interval until Stop.
func (l *Liveness) Start(ctx context.Context) error {
	if err := l.Register(ctx); err != nil {
		return err
	}
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.run()
	return nil
}

func (l *Liveness) run() {
	defer close(l.done)
	t := time.NewTicker(l.interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*l.interval+5*time.Second)
		if err := l.ping(ctx); err != nil {
			// The session that held the lock is gone: others may already take this instance for
			// dead. Registering again lets them tell it is back.
			if err := l.Register(ctx); err != nil {
				l.log.Warn("job liveness: cannot register again; retrying", "error", err.Error())
				cancel()
				continue
			}
			l.log.Warn("job liveness: the lock's database session was lost; registered again", "client", l.id)
		}
		r, err := l.Check(ctx)
		cancel()
		if err != nil {
			l.log.Warn("job liveness: check failed", "error", err.Error())
			continue
		}
		if len(r.Jobs) > 0 || len(r.Dead) > 0 {
			l.log.Info("job liveness: put back running jobs of dead or lost attempts", "dead_instances", len(r.Dead), "jobs", len(r.Jobs))
		}
	}
}

func (l *Liveness) ping(ctx context.Context) error {
	l.mu.Lock()
	conn := l.conn
	l.mu.Unlock()
	if conn == nil {
		return ErrNotRegistered
	}
	_, err := conn.Exec(ctx, `SELECT 1`)
	return err
}

// Stop ends the checks and the registration: the row goes, and the lock with the session.
func (l *Liveness) Stop(ctx context.Context) {
	if l.stop != nil {
		close(l.stop)
		<-l.done
		l.stop = nil
	}
	l.mu.Lock()
	conn := l.conn
	l.conn = nil
	l.mu.Unlock()
	if conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = conn.Exec(ctx, `DELETE FROM job_instances WHERE client_id = $1`, l.id)
	_ = conn.Close(ctx)
}

// busy lists the jobs whose attempts this instance runs or finished within the grace.
func (l *Liveness) busy() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int64, 0, len(l.inflight)+len(l.exited))
	for id := range l.inflight {
		out = append(out, id)
	}
	for id, at := range l.exited {
		if time.Since(at) > l.grace {
			delete(l.exited, id)
			continue
		}
		out = append(out, id)
	}
	return out
}

// rescueSQL puts back the running jobs whose latest attempt belongs to a dead instance ($1) or is
// one of this instance's ($2) started longer than the grace ($3) ago that no worker here runs ($4).
// The dead attempt counts, as River's own rescue counts it, but never as the last: max_attempts grows
// so that a job killed on its last attempt still gets one.
const rescueSQL = `UPDATE river_job SET state = 'available', scheduled_at = now(),
max_attempts = greatest(max_attempts, attempt + 1),
errors = array_append(errors, jsonb_build_object('at', now(), 'attempt', attempt, 'trace', '',
  'error', CASE WHEN attempted_by[array_length(attempted_by, 1)] = $2
    THEN 'put back: running in the database but in no worker of its instance (its result was not recorded)'
    ELSE 'put back: the instance running it died (its database session ended)' END))
WHERE state = 'running'
  AND (attempted_by[array_length(attempted_by, 1)] = ANY($1)
       OR attempted_by[array_length(attempted_by, 1)] = $2 AND attempted_at < now() - $3::interval AND NOT id = ANY($4))
RETURNING id, kind, args, attempted_by[array_length(attempted_by, 1)]`

// Check runs one round: instances whose lock nobody holds are dead; their running jobs, and this
// instance's orphaned ones, are made available now, with the hooks in the same transaction.
func (l *Liveness) Check(ctx context.Context) (Rescued, error) {
	var r Rescued
	busy := l.busy()
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `DELETE FROM job_instances i WHERE i.client_id <> $1 AND NOT EXISTS (
  SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory' AND k.classid = $2 AND k.objid = i.id::oid AND k.objsubid = 2 AND k.granted
    AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
RETURNING client_id`, l.id, livenessLockClass)
		if err != nil {
			return fmt.Errorf("find dead instances: %w", err)
		}
		if r.Dead, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return fmt.Errorf("find dead instances: %w", err)
		}
		rows, err = tx.Query(ctx, rescueSQL, r.Dead, l.id, l.grace.String(), busy)
		if err != nil {
			return fmt.Errorf("put jobs back: %w", err)
		}
		r.Jobs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (RescuedJob, error) {
			var j RescuedJob
			err := row.Scan(&j.ID, &j.Kind, &j.Args, &j.Client)
			return j, err
		})
		if err != nil {
			return fmt.Errorf("put jobs back: %w", err)
		}
		if len(r.Dead) == 0 && len(r.Jobs) == 0 {
			return nil
		}
		for _, h := range l.hooks {
			if err := h(ctx, tx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Rescued{}, fmt.Errorf("jobs: liveness check: %w", err)
	}
	return r, nil
}
