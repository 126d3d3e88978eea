package relay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"bookingledger/adapters/jobs"
	prelay "bookingledger/projections/relay"
)

// ReplayQueue is the River queue of replays' and backfills' deliveries: apart from Queue, with workers
// and request slots of its own, so a replay never holds a live delivery back (docs/relay.md, "Live
// before replay").
const ReplayQueue = "relay_replay"

// DefaultReplayRate is a replay's rate limit, in deliveries per second, when neither the replay nor
// the relay's configuration gives one: a quarter of what DefaultWorkers attempt at 16 ms each.
const DefaultReplayRate = 250.0

// ReplayShare is the share of a throttled endpoint's rate (--rate) a replay takes when it gives no
// rate of its own.
const ReplayShare = 0.5

// MaxReplayRate bounds a replay's rate.
const MaxReplayRate = 100_000.0

// replayPriority: on its own queue, a replay's jobs come after the retries of its deliveries that
// were handed to the live queue.
const replayPriority = 3

// ErrInvalidRate is a replay rate that is not a positive number of deliveries per second.
var ErrInvalidRate = errors.New("invalid replay rate")

// Kinds is the relay's work on the job queue: live deliveries and alerts on Queue (Workers), replays'
// deliveries on ReplayQueue (ReplayWorkers). Both must be given to the job queue: a replay's jobs
// on a queue no instance works would wait forever.
func (r *Relay) Kinds() ([]jobs.Kind, error) {
	if r.events == nil || r.codec == nil {
		return nil, errors.New("relay: workers need the event store and codec")
	}
	live := jobs.Kind{Queue: Queue, Workers: r.workers, Register: func(ws *river.Workers) error {
		if err := river.AddWorkerSafely(ws, &deliverWorker{r: r}); err != nil {
			return err
		}
		if err := river.AddWorkerSafely(ws, &opWorker{r: r}); err != nil {
			return err
		}
		return river.AddWorkerSafely(ws, &alertWorker{r: r})
	}}
	// The workers are River's, one registry for every queue: the replay queue adds none.
	replay := jobs.Kind{Queue: ReplayQueue, Workers: cap(r.replaySending), Register: func(*river.Workers) error { return nil }}
	return []jobs.Kind{live, replay}, nil
}

// slots are the request slots of a job's deliveries: the replay queue's own, so that replays never
// take the live deliveries' ones.
func (r *Relay) slots(job *river.Job[DeliverArgs]) chan struct{} {
	if job.Queue == ReplayQueue {
		return r.replaySending
	}
	return r.sending
}

// rateOf is the rate a replay runs at: its own, else the relay's.
func (r *Relay) rateOf(q ReplayQuery, e Endpoint) float64 {
	if q.Rate > 0 {
		return q.Rate
	}
	if e.RatePerSecond > 0 {
		// A throttled endpoint: the replay takes a share of its rate, the rest stays for live traffic.
		return min(r.replayRate, e.RatePerSecond*ReplayShare)
	}
	return r.replayRate
}

func checkRate(rate float64) error {
	if rate < 0 || math.IsNaN(rate) || math.IsInf(rate, 0) || rate > MaxReplayRate {
		return fmt.Errorf("%w: %v: want deliveries per second, more than 0 and at most %v (0: the default)", ErrInvalidRate, rate, MaxReplayRate)
	}
	return nil
}

// ReplayDuration is how long sending n deliveries at rate takes at least.
func ReplayDuration(n int, rate float64) time.Duration { return prelay.Duration(n, rate) }

// pacer spaces a replay's jobs: the job of its k-th delivery is due k/rate after the start, so the
// replay's sends average the rate whatever the backlog.
type pacer struct {
	start time.Time
	rate  float64
	n     int
}

// enqueue inserts the replay jobs of ids on ReplayQueue, each due when the rate lets its first
// delivery go.
func (p *pacer) enqueue(ctx context.Context, r *Relay, tx pgx.Tx, ids []int64) error {
	var params []river.InsertManyParams
	for len(ids) > 0 {
		n := min(len(ids), maxJobDeliveries)
		at := p.start.Add(ReplayDuration(p.n, p.rate))
		args := DeliverArgs{DeliveryIDs: ids[:n]}
		if n == 1 {
			args = DeliverArgs{DeliveryID: ids[0]}
		}
		params = append(params, river.InsertManyParams{Args: args, InsertOpts: &river.InsertOpts{Queue: ReplayQueue,
			MaxAttempts: jobMaxAttempts, ScheduledAt: at, Priority: replayPriority}})
		p.n += n
		ids = ids[n:]
	}
	return r.insertJobs(ctx, tx, params)
}
