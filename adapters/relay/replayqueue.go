package relay

import (
	"context"
	"errors"
	"slices"
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

// Replays' rates are projections/relay's: DefaultReplayRate when neither the replay nor the relay's
// configuration gives one, ReplayShare of a throttled endpoint's rate, at most MaxReplayRate.
const (
	DefaultReplayRate = prelay.DefaultReplayRate
	ReplayShare       = prelay.ReplayShare
	MaxReplayRate     = prelay.MaxReplayRate
)

// replayPriority: on its own queue, a replay's jobs come after the retries of its deliveries that
// were handed to the live queue.
const replayPriority = 3

// ErrInvalidRate is a replay rate that is not a positive number of deliveries per second.
var ErrInvalidRate = prelay.ErrInvalidRate

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

// ReplayDuration is how long sending n deliveries at rate takes at least.
func ReplayDuration(n int, rate float64) time.Duration { return prelay.Duration(n, rate) }

// enqueueReplay inserts the replay jobs of ids on ReplayQueue, each due when pace lets its first
// delivery go (projections/relay.Pacer).
func (r *Relay) enqueueReplay(ctx context.Context, tx pgx.Tx, pace *prelay.Pacer, ids []int64) error {
	var params []river.InsertManyParams
	for chunk := range slices.Chunk(ids, maxJobDeliveries) {
		params = appendJobs(params, chunk, &river.InsertOpts{Queue: ReplayQueue, MaxAttempts: jobMaxAttempts,
			ScheduledAt: pace.Take(len(chunk)), Priority: replayPriority})
	}
	return r.insertJobs(ctx, tx, params)
}
