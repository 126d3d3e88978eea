package privacy

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

// RetentionQueue is the River queue of the retention job.
const RetentionQueue = "privacy"

// retentionBatch bounds the bodies shredded per transaction.
const retentionBatch = 1000

// RetentionArgs is the periodic job that shreds receipt bodies older than the retention
// (BOOKINGLEDGER_RECEIPT_BODY_RETENTION). It carries no data: the job reads the age from its worker.
type RetentionArgs struct{}

// Kind implements river.JobArgs.
func (RetentionArgs) Kind() string { return "receipt_body_retention" }

// InsertOpts puts the job on its own queue, one at a time.
func (RetentionArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: RetentionQueue, UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: time.Minute}}
}

// RetentionWorker shreds bodies stored longer ago than Retention.
type RetentionWorker struct {
	river.WorkerDefaults[RetentionArgs]
	Pool *pgxpool.Pool
	// Receipts is the receipts' owner (adapters/postgres.Store).
	Receipts  ReceiptBodies
	Retention time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Work implements river.Worker.
func (w *RetentionWorker) Work(ctx context.Context, _ *river.Job[RetentionArgs]) error {
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	_, err := ShredOlderThan(ctx, w.Pool, w.Receipts, now().Add(-w.Retention))
	return err
}

// ShredOlderThan replaces every receipt body first stored before cutoff by a tombstone (inline copies
// of receipts received before it too), deletes the data keys that no longer seal any body, and records
// the run as an erasure of kind retention when it shredded anything. It returns the counts.
//
// Each batch costs in proportion to itself, whatever the tables hold: the bodies are found by the
// partial index of those not shredded (its predicate is in the query, or the planner cannot use it;
// a body with a subject and no data key is a tombstone), only the shredded bodies' subjects' keys are
// looked at, and inline bodies are taken in id order, each batch after the last one's, until one
// comes back short.
func ShredOlderThan(ctx context.Context, pool *pgxpool.Pool, receipts ReceiptBodies, cutoff time.Time) (Counts, error) {
	var (
		total                   Counts
		bodiesDone, inlinesDone bool
		after                   int64 // the last inline body's receipt
	)
	for !bodiesDone || !inlinesDone {
		var c Counts
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			now := time.Now().UTC().Truncate(time.Second)
			if !bodiesDone {
				var (
					subjects []string
					err      error
				)
				if c.Bodies, subjects, err = receipts.ShredReceiptBodies(ctx, tx, cutoff, now, retentionBatch); err != nil {
					return err
				}
				// An ingest of these subjects in flight may be sealing a body with one of their keys:
				// it commits first, or waits for this transaction and stores its key again.
				if err := lockSubjects(ctx, tx, subjects); err != nil {
					return err
				}
				// A key younger than the cutoff that seals nothing (another process's, made for a body
				// already stored) goes with the subject's last sealed body.
				// The keys that still seal a body come from the bodies' owner, after the lock: no
				// ingest of these subjects commits a body in between.
				sealing, keys, err := receipts.SealingKeys(ctx, tx, subjects)
				if err != nil {
					return err
				}
				tag, err := tx.Exec(ctx, `DELETE FROM subject_keys k WHERE k.subject = ANY($2)
    AND NOT EXISTS (SELECT 1 FROM unnest($3::text[], $4::uuid[]) AS u(subject, key) WHERE u.subject = k.subject AND u.key = k.id)
    AND (k.created_at < $1 OR NOT k.subject = ANY($3))`, cutoff, subjects, sealing, keys)
				if err != nil {
					return fmt.Errorf("delete unused data keys: %w", err)
				}
				c.DataKeys = tag.RowsAffected()
			}
			if !inlinesDone {
				var err error
				if c.InlineBodies, after, err = receipts.ShredInlineReceiptBodies(ctx, tx, cutoff, now, after, retentionBatch); err != nil {
					return err
				}
			}
			if c == (Counts{}) {
				return nil
			}
			counts, err := json.Marshal(c)
			if err != nil {
				return fmt.Errorf("encode counts: %w", err)
			}
			_, err = tx.Exec(ctx, `INSERT INTO erasures (kind, erased_at, erased_by, bookings, counts) VALUES ($3, $1, 'retention', '{}', $2)`, now, counts, KindRetention)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("retention: %w", err)
		}
		total.Bodies += c.Bodies
		total.InlineBodies += c.InlineBodies
		total.DataKeys += c.DataKeys
		bodiesDone = bodiesDone || c.Bodies < retentionBatch
		inlinesDone = inlinesDone || c.InlineBodies < retentionBatch
	}
	return total, nil
}

// RetentionJob is the periodic job that runs the worker every interval, and once at start.
func RetentionJob(interval time.Duration) *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) { return RetentionArgs{}, nil },
		&river.PeriodicJobOpts{RunOnStart: true})
}
