package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"bookingledger/adapters/providers"
	"bookingledger/domain/ledger"
)

type pgxTx = pgx.Tx

// QueueDeferred is the River queue of deferred deliveries.
const QueueDeferred = "deferred"

// Defaults of Config.
//
// DefaultMaxAttempts with River's default backoff (attempt⁴ seconds, ±10 % jitter) spreads the
// attempts over about eleven hours: long enough to ride out a provider's API outage of an afternoon,
// short enough that an operator hears of a delivery that will never fetch on the same day.
const (
	DefaultMaxAttempts = 12
	DefaultWorkers     = 4
	DefaultJobTimeout  = time.Minute
	// DefaultStopTimeout bounds how long Stop lets running jobs finish before it cancels them; a
	// canceled job is retried, and its delivery is recognised as a duplicate if it had committed.
	DefaultStopTimeout = 20 * time.Second
	// cancelGrace is the least time Stop waits, after canceling running jobs, for their attempts to
	// record that they were canceled.
	cancelGrace = 10 * time.Second
	// DefaultRecordRetry is how soon a final attempt that could not record its outcome tries again:
	// it snoozes (River does not count a snooze as an attempt) rather than giving up with the delivery
	// recorded nowhere but in the deferred receipt.
	DefaultRecordRetry = time.Minute
	// DefaultFetchCooldown is the least time between two fetches of one queue, and between two
	// insert notifications of one queue. River's default (100 ms) caps a queue at MaxWorkers jobs
	// per 100 ms however short the jobs are: 16 step workers could finish at most 160 steps a
	// second, less than the 400 of 200 bookings a second (docs/process-steps.md, "Keeping up").
	DefaultFetchCooldown = 5 * time.Millisecond
)

// Recorder records a delivery: domain/ledger.Service.
type Recorder interface {
	Record(ctx context.Context, d ledger.Delivery) (ledger.Result, error)
}

var _ Recorder = (*ledger.Service)(nil)

// Refetcher maps a deferred delivery again. Refetch gets the stored verified body, the index of the
// secret that verified it (in the provider's configured list) and the time of the attempt; its errors wrap providers.ErrUnmappable
// (the body will never map: quarantine) or anything else (try again later).
type Refetcher interface {
	Name() string
	Refetch(ctx context.Context, body []byte, secretIndex int, observedAt time.Time) (providers.Mapped, error)
}

// RefetchArgs is the job of one deferred delivery. It carries references only: the body stays in the
// receipt, where operators see it, and the secret itself never leaves the configuration.
type RefetchArgs struct {
	// ReceiptID is the deferred receipt.
	ReceiptID int64 `json:"receipt_id"`
	// Provider names the Refetcher.
	Provider string `json:"provider"`
	// SecretIndex is the position of the secret that verified the delivery in the provider's list.
	// Jobs queued before it existed carried a secret_fingerprint instead; they read as index 0, the
	// newest secret, which is what the provider falls back to when a secret was rotated out anyway.
	SecretIndex int `json:"secret_index"`
	// Subject is what one job fetches: "<provider>:<booking>" when the body names its booking (an
	// Acuity appointment), else "<provider>:<delivery id>". It is River's uniqueness key: while a job
	// for it waits or retries, further deliveries of the subject join it instead of adding jobs (its
	// next fetch sees the latest state for all of them). Jobs queued before it existed have none.
	Subject string `json:"subject,omitempty" river:"unique"`
}

// Kind is River's name of the job. Stored in river_job rows: never rename it.
func (RefetchArgs) Kind() string { return "bookingledger.refetch_deferred" }

// Config configures a Queue.
type Config struct {
	Pool   *pgxpool.Pool
	Ledger Recorder
	// Refetchers are the providers that can finish their deferred deliveries, by Name.
	Refetchers []Refetcher
	Logger     *slog.Logger
	// MaxAttempts bounds the fetches of one deferred delivery (DefaultMaxAttempts when zero).
	MaxAttempts int
	// Workers is how many deferred deliveries are worked at once (DefaultWorkers when zero).
	Workers int
	// JobTimeout bounds one attempt: fetch and record (DefaultJobTimeout when zero).
	JobTimeout time.Duration
	// RescueAfter is how long a job may stay running before River takes it for the job of a crashed
	// process and runs it again (River's default, an hour, when zero). It must not be below
	// JobTimeout.
	RescueAfter time.Duration
	// StopTimeout bounds Stop's wait for running jobs (DefaultStopTimeout when zero).
	StopTimeout time.Duration
	// RecordRetry is how soon a final attempt whose outcome could not be recorded runs again
	// (DefaultRecordRetry when zero).
	RecordRetry time.Duration
	// RetryPolicy decides when a failed attempt runs again; nil means River's default (attempt⁴
	// seconds with jitter). Tests use a short fixed delay.
	RetryPolicy river.ClientRetryPolicy
	// PollInterval is how often the queue looks for due jobs besides River's LISTEN/NOTIFY wake-ups
	// (River's default, 1 s, when zero).
	PollInterval time.Duration
	// FetchCooldown is the least time between two fetches of one queue (DefaultFetchCooldown when
	// zero; at most PollInterval).
	FetchCooldown time.Duration
	// Clock is the time of each attempt, which becomes the observation time of what it fetched; nil
	// means time.Now.
	Clock func() time.Time
	// Kinds are further kinds of work on the same River client (process steps, relay deliveries), each
	// on its own queue so that one kind's backlog never starves another's.
	Kinds []Kind
	// Receipts keeps the deferred receipts (required with Refetchers): their bodies sealed and opened
	// as the ledger's are.
	Receipts Receipts
	// Liveness, when set, names the River client (its id is the one liveness registers) and tracks
	// the jobs its workers run, so that the work of a dead or cut-off instance resumes in seconds.
	Liveness *Liveness
}

// Kind is a kind of background work: its River queue, how many of its jobs run at once in this
// instance, and the registration of its workers. Its jobs are inserted through Queue.Client, usually
// with InsertManyTx in the transaction of the projection that planned them.
type Kind struct {
	Queue    string
	Workers  int
	Register func(*river.Workers) error
	// Periodic are jobs of the kind River inserts on a schedule (the leader only).
	Periodic []*river.PeriodicJob
}

// Queue defers deliveries and works the deferred ones. Create it with New; Defer works without Start
// (any instance can insert), Start runs the workers. Safe for concurrent use.
type Queue struct {
	pool        *pgxpool.Pool
	receipts    Receipts
	client      *river.Client[pgx.Tx]
	maxAttempts int
	stopTimeout time.Duration
	refetchers  map[string]Refetcher
	log         *slog.Logger
}

// New builds a queue over River on cfg.Pool. River's schema must be migrated (Migrate) before Start.
func New(cfg Config) (*Queue, error) {
	if cfg.Pool == nil || cfg.Ledger == nil {
		return nil, errors.New("jobs: pool and ledger are required")
	}
	if len(cfg.Refetchers) > 0 && cfg.Receipts == nil {
		return nil, errors.New("jobs: receipts are required to defer deliveries")
	}
	if cfg.MaxAttempts < 0 || cfg.Workers < 0 || cfg.JobTimeout < 0 || cfg.StopTimeout < 0 || cfg.RecordRetry < 0 || cfg.FetchCooldown < 0 ||
		slices.ContainsFunc(cfg.Kinds, func(k Kind) bool { return k.Workers < 0 }) {
		return nil, errors.New("jobs: negative limit")
	}
	q := &Queue{
		pool:        cfg.Pool,
		receipts:    cfg.Receipts,
		maxAttempts: cmp.Or(cfg.MaxAttempts, DefaultMaxAttempts),
		stopTimeout: cmp.Or(cfg.StopTimeout, DefaultStopTimeout),
		refetchers:  make(map[string]Refetcher, len(cfg.Refetchers)),
		log:         cfg.Logger,
	}
	if q.log == nil {
		q.log = slog.New(slog.DiscardHandler)
	}
	for _, r := range cfg.Refetchers {
		if _, dup := q.refetchers[r.Name()]; dup {
			return nil, fmt.Errorf("jobs: refetcher %q configured twice", r.Name())
		}
		q.refetchers[r.Name()] = r
	}
	clock := cfg.Clock
	if clock == nil {
		clock = time.Now
	}
	workers := river.NewWorkers()
	w := &refetchWorker{q: q, ledger: cfg.Ledger, clock: clock, recordRetry: cmp.Or(cfg.RecordRetry, DefaultRecordRetry)}
	if err := river.AddWorkerSafely(workers, w); err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	queues := map[string]river.QueueConfig{QueueDeferred: {MaxWorkers: cmp.Or(cfg.Workers, DefaultWorkers)}}
	var periodic []*river.PeriodicJob
	for _, k := range cfg.Kinds {
		if _, dup := queues[k.Queue]; dup || k.Queue == "" || k.Register == nil {
			return nil, fmt.Errorf("jobs: kind on queue %q: queue empty, taken, or without workers", k.Queue)
		}
		if err := k.Register(workers); err != nil {
			return nil, fmt.Errorf("jobs: queue %s: %w", k.Queue, err)
		}
		queues[k.Queue] = river.QueueConfig{MaxWorkers: cmp.Or(k.Workers, DefaultWorkers)}
		periodic = append(periodic, k.Periodic...)
	}
	rc := &river.Config{
		// River's own logs go to ours: its default is stdout, which serve reserves for "listening on".
		Logger:       slog.New(quietInfo{q.log.Handler()}).With("component", "river"),
		Queues:       queues,
		Workers:      workers,
		PeriodicJobs: periodic,
		MaxAttempts:  q.maxAttempts,
		JobTimeout:   cmp.Or(cfg.JobTimeout, DefaultJobTimeout),
		RetryPolicy:  cfg.RetryPolicy,
		// Zero keeps River's default.
		RescueStuckJobsAfter: cfg.RescueAfter,
	}
	if cfg.Liveness != nil {
		rc.ID = cfg.Liveness.ID()
		rc.Middleware = append(rc.Middleware, cfg.Liveness.Middleware())
	}
	rc.FetchCooldown = cmp.Or(cfg.FetchCooldown, DefaultFetchCooldown)
	if cfg.PollInterval > 0 {
		rc.FetchPollInterval = cfg.PollInterval
		rc.FetchCooldown = min(cfg.PollInterval, rc.FetchCooldown)
	}
	client, err := river.NewClient(riverpgxv5.New(cfg.Pool), rc)
	if err != nil {
		return nil, fmt.Errorf("jobs: river client: %w", err)
	}
	q.client = client
	return q, nil
}

// Start runs the workers until Stop. It returns once they run.
func (q *Queue) Start(ctx context.Context) error {
	// Detached from ctx: canceling the caller's context would start River's stop on its own, and the
	// shutdown order (HTTP drained first, jobs second, pool last) belongs to the caller, through Stop.
	if err := q.client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start job queue: %w", err)
	}
	return nil
}

// Stop lets running jobs finish for up to the stop timeout, then cancels them (River retries a
// canceled attempt later) and waits for the workers to return.
func (q *Queue) Stop(ctx context.Context) error {
	soft, cancel := context.WithTimeout(ctx, q.stopTimeout)
	defer cancel()
	err := q.client.Stop(soft)
	if err == nil {
		return nil
	}
	q.log.Warn("job queue: running jobs did not finish in time; canceling them", "timeout", q.stopTimeout.String())
	// Canceled attempts still record their outcome (the job goes back to retryable), which on a busy
	// machine takes longer than a short soft bound: the hard phase waits at least cancelGrace.
	hard, cancelHard := context.WithTimeout(context.WithoutCancel(ctx), max(q.stopTimeout, cancelGrace))
	defer cancelHard()
	if err := q.client.StopAndCancel(hard); err != nil {
		return fmt.Errorf("stop job queue: %w", err)
	}
	return nil
}

// Client is the River client, for tests that wait on its events.
func (q *Queue) Client() *river.Client[pgx.Tx] { return q.client }

// Receipts is the receipts table's owner (adapters/postgres.Store, with the ledger's body sealer):
// deferred receipts are written and read back through it.
type Receipts interface {
	// InsertDeferred stores r as a deferred receipt in tx and returns its id.
	InsertDeferred(ctx context.Context, tx pgx.Tx, r ledger.Receipt) (int64, error)
	// MarkDuplicate turns receipt id into a duplicate with reason, in tx.
	MarkDuplicate(ctx context.Context, tx pgx.Tx, id int64, reason string) error
	// Receipt reads receipt id back, its body opened (nil when erased); an error wrapping
	// pgx.ErrNoRows when there is none.
	Receipt(ctx context.Context, id int64) (ledger.Receipt, error)
}

// Defer keeps a verified delivery whose mapping must wait: the deferred receipt (with the body) and
// the job that will finish it commit in one transaction, so the delivery is either kept and scheduled
// or not kept at all (and the caller answers 503). v names the secret that verified it. The result's
// outcome is ledger.OutcomeDeferred.
func (q *Queue) Defer(ctx context.Context, r ledger.Receipt, v providers.Verified) (ledger.Result, error) {
	if _, ok := q.refetchers[r.Provider]; !ok {
		// A job no worker can finish would only ever end quarantined: refuse now, visibly.
		return ledger.Result{}, fmt.Errorf("defer %s delivery %s: provider cannot refetch", r.Provider, r.DeliveryID)
	}
	reason := ledger.ClipReason(r.Reason)
	tx, err := q.pool.Begin(ctx)
	if err != nil {
		return ledger.Result{}, fmt.Errorf("defer delivery %s: begin: %w", r.DeliveryID, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // no-op after Commit
	dr := r
	dr.Reason = reason
	id, err := q.receipts.InsertDeferred(ctx, tx, dr)
	if err != nil {
		return ledger.Result{}, fmt.Errorf("defer delivery %s: insert receipt: %w", r.DeliveryID, err)
	}
	subject := string(r.Booking)
	if subject == "" {
		subject = r.DeliveryID
	}
	args := RefetchArgs{ReceiptID: id, Provider: r.Provider, SecretIndex: v.SecretIndex, Subject: r.Provider + ":" + subject}
	opts := &river.InsertOpts{Queue: QueueDeferred, MaxAttempts: q.maxAttempts, UniqueOpts: river.UniqueOpts{
		// Completed, cancelled and discarded jobs do not count: a delivery after them is new work.
		ByArgs: true, ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
			rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled},
	}}
	job, err := q.client.InsertTx(ctx, tx, args, opts)
	if err != nil {
		return ledger.Result{}, fmt.Errorf("defer delivery %s: insert job: %w", r.DeliveryID, err)
	}
	res := ledger.Result{Outcome: ledger.OutcomeDeferred, Reason: reason, Booking: r.Booking}
	switch {
	case !job.UniqueSkippedAsDuplicate:
	case job.Job.State == rivertype.JobStateRunning:
		// The running job may have fetched already, before the change this delivery announces: it
		// gets a job of its own (not unique, so it cannot collide).
		opts.UniqueOpts = river.UniqueOpts{}
		if job, err = q.client.InsertTx(ctx, tx, args, opts); err != nil {
			return ledger.Result{}, fmt.Errorf("defer delivery %s: insert job: %w", r.DeliveryID, err)
		}
	default:
		// A job for the subject has not fetched yet (or fetches again after a failure): its fetch
		// covers this delivery too. The receipt stays, as a duplicate of that deferral.
		first := deferredReceiptOf(job.Job)
		res.Outcome = ledger.OutcomeDuplicate
		res.Reason = ledger.ClipReason(fmt.Sprintf("duplicate of deferred receipt %d (job %d), whose fetch covers it; %s", first, job.Job.ID, reason))
		if err := q.receipts.MarkDuplicate(ctx, tx, id, res.Reason); err != nil {
			return ledger.Result{}, fmt.Errorf("defer delivery %s: mark duplicate: %w", r.DeliveryID, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return ledger.Result{}, fmt.Errorf("defer delivery %s: commit: %w", r.DeliveryID, err)
	}
	q.log.Info("delivery deferred", "provider", r.Provider, "delivery_id", r.DeliveryID, "receipt", id,
		"job", job.Job.ID, "outcome", string(res.Outcome))
	return res, nil
}

// deferredReceiptOf reads the receipt id of a refetch job's args (0 if they do not decode).
func deferredReceiptOf(j *rivertype.JobRow) int64 {
	var a RefetchArgs
	if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
		return 0
	}
	return a.ReceiptID
}

// quietInfo hands River's records to the log with Info lowered to Debug: River reports its
// routine at Info ("client started", and every 10 s, per queue that worked, "Producer job counts"),
// which in a serve whose periodic syncs and checks complete jobs every few seconds is a log line
// a few times a minute saying nothing an operator acts on. Warnings and errors pass as they are.
type quietInfo struct{ slog.Handler }

func (q quietInfo) Enabled(ctx context.Context, l slog.Level) bool {
	if l == slog.LevelInfo {
		l = slog.LevelDebug
	}
	return q.Handler.Enabled(ctx, l)
}

func (q quietInfo) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo {
		r.Level = slog.LevelDebug
	}
	return q.Handler.Handle(ctx, r)
}

func (q quietInfo) WithAttrs(as []slog.Attr) slog.Handler { return quietInfo{q.Handler.WithAttrs(as)} }
func (q quietInfo) WithGroup(n string) slog.Handler       { return quietInfo{q.Handler.WithGroup(n)} }
