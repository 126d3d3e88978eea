package process

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// Queue is the River queue of step jobs.
const Queue = "steps"

// DefaultMaxAttempts of a step's job.
const DefaultMaxAttempts = 10

// MaxJobsPerInsert bounds the jobs of one insert (InsertJobs inserts more in several).
const MaxJobsPerInsert = 1000

// StepArgs is the River job of one step: its id, and its booking so that the claim reads the booking's
// calendar row with its first read (jobs inserted before it carry none: the claim reads the row after).
// The step row is the record.
type StepArgs struct {
	Step    int64  `json:"step"`
	Booking string `json:"booking,omitempty"`
}

// Kind is River's name of the job. Stored in river_job rows: never rename it.
func (StepArgs) Kind() string { return "bookingledger.process_step" }

// InsertJobs inserts one job per step in tx.
func InsertJobs(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], ids []StepArgs, maxAttempts int) error {
	for len(ids) > 0 {
		n := min(len(ids), MaxJobsPerInsert)
		params := make([]river.InsertManyParams, n)
		for i, args := range ids[:n] {
			params[i] = river.InsertManyParams{Args: args, InsertOpts: &river.InsertOpts{Queue: Queue, MaxAttempts: maxAttempts}}
		}
		if _, err := client.InsertManyTx(ctx, tx, params); err != nil {
			return fmt.Errorf("process: insert step jobs: %w", err)
		}
		ids = ids[n:]
	}
	return nil
}
