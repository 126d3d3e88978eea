package serve

import (
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"bookingledger/adapters/jobs"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/privacy"
)

// retentionInterval is how often the retention job looks for bodies past their age.
const retentionInterval = time.Hour

// retentionKinds is the retention job's queue when a retention is configured.
func retentionKinds(pool *pgxpool.Pool, retention time.Duration) []jobs.Kind {
	if retention <= 0 {
		return nil
	}
	return []jobs.Kind{{Queue: privacy.RetentionQueue, Workers: 1,
		Register: func(w *river.Workers) error {
			return river.AddWorkerSafely(w, &privacy.RetentionWorker{Pool: pool, Receipts: postgres.NewStore(pool), Retention: retention})
		},
		Periodic: []*river.PeriodicJob{privacy.RetentionJob(retentionInterval)}}}
}
