package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"bookingledger/adapters/jobs"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/relaystore"
	"bookingledger/domain/eventlog"
	prelay "bookingledger/projections/relay"
)

// Queue is the River queue of relay work (deliveries and alerts).
const Queue = "relay"

// ProjectionName is the relay projection's checkpoint and lock name.
const ProjectionName = "relay"

// DefaultSchedule and DefaultJitter are projections/relay's: eight attempts, the last about 33 hours
// after the event, each wait lengthened or shortened at random by up to 10 %.
var DefaultSchedule = prelay.DefaultSchedule

const DefaultJitter = prelay.DefaultJitter

// DefaultWorkers is how many deliveries one instance attempts at once. An attempt mostly waits (for
// the receiver, for its commit), so the workers bound the rate: 16 attempts in flight is 1,000 a
// second at 16 ms each (docs/relay.md, "Keeping up").
const DefaultWorkers = 16

// DefaultInlineWait is the longest wait a worker spends itself. River makes scheduled jobs available
// only every 5 s, which sub-second schedules (tests, tight receivers) would not survive; longer waits
// go through River so that a down receiver never holds a worker for long.
const DefaultInlineWait = time.Second

// DefaultReplayPage is how many events of the log a window replay reads at a time, looking for events
// that have no delivery of its endpoint.
const DefaultReplayPage = 1000

// jobMaxAttempts bounds River's own retries of one job: they happen only when the worker could not
// record an attempt (the database was unavailable), never for a failed send, which the relay
// schedules itself.
const jobMaxAttempts = 25

// Decoder turns stored events into domain events (adapters/eventcodec.JSON): booking events and the
// calendar's link events (projections/relay's, whose subjects and messages decode with it).
type Decoder = prelay.Decoder

// Config configures a Relay. Pool is required; Events and Codec only where deliveries are worked.
type Config struct {
	Pool   *pgxpool.Pool
	Events eventlog.Store
	Codec  Decoder
	Guard  Guard
	// Schedule is the wait before each attempt (DefaultSchedule when empty); its length is the number
	// of attempts before a delivery is dead.
	Schedule []time.Duration
	// Jitter is the random fraction of each wait (DefaultJitter when zero; negative: none).
	Jitter float64
	// AttemptTimeout bounds one attempt (DefaultAttemptTimeout when zero).
	AttemptTimeout time.Duration
	// InlineWait is the longest wait before a retry that a worker spends itself rather than through
	// a scheduled job (DefaultInlineWait when zero; negative: none).
	InlineWait time.Duration
	// Workers is how many deliveries this instance attempts at once (DefaultWorkers when zero).
	Workers int
	// ReplayPage is how many events a window replay reads from the log at a time (DefaultReplayPage
	// when zero).
	ReplayPage int
	// ReplayRate is a replay's rate limit in deliveries per second when the replay gives none
	// (DefaultReplayRate when zero).
	ReplayRate float64
	// ReplayWorkers is how many replay deliveries this instance attempts at once, apart from Workers
	// (a quarter of Workers, at least 1, when zero).
	ReplayWorkers int
	Alerts        AlertConfig
	Logger        *slog.Logger
	// Metrics records attempts and alerts; nil records nothing.
	Metrics *Metrics
	// Clock is nil for time.Now.
	Clock func() time.Time
}

type store = relaystore.Store

// Relay plans, sends and administers deliveries. Safe for concurrent use.
type Relay struct {
	pool *pgxpool.Pool
	// store runs the relay's statements; its exported methods (the listings) are the relay's.
	*store
	events         eventlog.Store
	codec          Decoder
	guard          Guard
	client         httpDoer
	schedule       prelay.Schedule
	workers        int
	replayPage     int
	replayRate     float64
	inlineWait     time.Duration
	attemptTimeout time.Duration
	alerts         AlertConfig
	log            *slog.Logger
	metrics        *Metrics
	clock          func() time.Time
	// inserter inserts jobs in the caller's transaction; it is insert-only (no workers), so that
	// every command, not only serve, can schedule work.
	inserter *river.Client[pgx.Tx]
	// sending bounds the attempts in flight to workers: a job attempts its deliveries at once.
	sending chan struct{}
	// limits bounds each endpoint's attempts in flight (its concurrency).
	limits endpointLimits
	// replaySending bounds the replay queue's attempts in flight, apart from sending.
	replaySending chan struct{}
}

// New returns a relay.
func New(cfg Config) (*Relay, error) {
	if cfg.Pool == nil {
		return nil, errors.New("relay: pool is required")
	}
	schedule, err := prelay.NewSchedule(cfg.Schedule, cfg.Jitter)
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	if err := CheckAlerts(cfg.Alerts); err != nil {
		return nil, err
	}
	// Its cooldown is also how often it may wake the workers of a queue: River's default (100 ms) would
	// leave a job inserted just after another waiting for the next wake-up or poll.
	ins, err := river.NewClient(riverpgxv5.New(cfg.Pool), &river.Config{FetchCooldown: jobs.DefaultFetchCooldown})
	if err != nil {
		return nil, fmt.Errorf("relay: river client: %w", err)
	}
	r := &Relay{pool: cfg.Pool, store: relaystore.New(cfg.Pool), events: cfg.Events, codec: cfg.Codec, guard: cfg.Guard,
		client: cfg.Guard.Client(cfg.AttemptTimeout), schedule: schedule,
		workers: cfg.Workers, replayPage: cmp.Or(max(cfg.ReplayPage, 0), DefaultReplayPage), attemptTimeout: cmp.Or(cfg.AttemptTimeout, DefaultAttemptTimeout), alerts: cfg.Alerts, log: cfg.Logger, metrics: cfg.Metrics, clock: cfg.Clock,
		inserter: ins}
	switch {
	case cfg.InlineWait == 0:
		r.inlineWait = DefaultInlineWait
	case cfg.InlineWait > 0:
		r.inlineWait = cfg.InlineWait
	default:
		r.inlineWait = -1
	}
	if r.workers <= 0 {
		r.workers = DefaultWorkers
	}
	r.sending = make(chan struct{}, r.workers)
	r.replaySending = make(chan struct{}, cmp.Or(max(cfg.ReplayWorkers, 0), max(r.workers/4, 1)))
	if err := prelay.CheckRate(cfg.ReplayRate); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	r.replayRate = cmp.Or(cfg.ReplayRate, DefaultReplayRate)
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.clock == nil {
		r.clock = time.Now
	}
	return r, nil
}

// Projection returns the relay projection: it plans the deliveries of each batch of events in the
// transaction that advances its checkpoint. It has no reset: a replayed log finds the deliveries it
// planned already (one per event and endpoint) and plans nothing twice.
func (r *Relay) Projection() (*checkpoint.Projection, error) {
	return checkpoint.New(r.pool, checkpoint.Config{Name: ProjectionName, Apply: r.plan, Idle: r.unsubscribed})
}

// DeliverArgs is the job of attempting deliveries of one endpoint. Stored in river_job rows: never
// rename its fields.
type DeliverArgs struct {
	// DeliveryID is the delivery of a job of one (a retry; every job inserted before batches).
	DeliveryID int64 `json:"delivery_id,omitempty"`
	// DeliveryIDs are the deliveries of a job of several, up to maxJobDeliveries of one endpoint.
	DeliveryIDs []int64 `json:"delivery_ids,omitempty"`
}

// Kind is River's name of the job.
func (DeliverArgs) Kind() string { return "bookingledger.relay_deliver" }

func (a DeliverArgs) ids() []int64 {
	if len(a.DeliveryIDs) > 0 {
		return a.DeliveryIDs
	}
	return []int64{a.DeliveryID}
}

// AlertArgs is the job that sends one alert.
type AlertArgs struct {
	AlertID int64 `json:"alert_id"`
}

// Kind is River's name of the job.
func (AlertArgs) Kind() string { return "bookingledger.relay_alert" }

// maxJobDeliveries bounds the deliveries of one job. A job's deliveries are attempted together and
// recorded in one transaction, so River's work (insert, fetch, completion) and the commit are shared
// by all of them: one job and one commit per delivery was most of a delivery's database time
// (docs/relay.md, "Keeping up").
const maxJobDeliveries = 32

// enqueue inserts the jobs of ids, deliveries of one endpoint, due at at (zero: now): up to
// maxJobDeliveries per job.
func (r *Relay) enqueue(ctx context.Context, tx pgx.Tx, ids []int64, at time.Time) error {
	return r.insertJobs(ctx, tx, jobParams(nil, ids, at))
}

// jobParams appends the jobs of ids, deliveries of one endpoint, due at at, to params.
func jobParams(params []river.InsertManyParams, ids []int64, at time.Time) []river.InsertManyParams {
	return appendJobs(params, ids, &river.InsertOpts{Queue: Queue, MaxAttempts: jobMaxAttempts, ScheduledAt: at, Priority: deliveryPriority})
}

// appendJobs appends the jobs of ids with opts to params, up to maxJobDeliveries per job.
func appendJobs(params []river.InsertManyParams, ids []int64, opts *river.InsertOpts) []river.InsertManyParams {
	for chunk := range slices.Chunk(ids, maxJobDeliveries) {
		args := DeliverArgs{DeliveryIDs: chunk}
		if len(chunk) == 1 {
			args = DeliverArgs{DeliveryID: chunk[0]}
		}
		params = append(params, river.InsertManyParams{Args: args, InsertOpts: opts})
	}
	return params
}

func (r *Relay) insertJobs(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) error {
	if len(params) == 0 {
		return nil
	}
	if _, err := r.inserter.InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("insert delivery jobs: %w", err)
	}
	return nil
}
