package jobs

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Backlog returns, by River queue, the jobs not finished yet: waiting, scheduled (a retry's backoff
// included) or running. Completed, cancelled and discarded jobs are not counted. On QueueDeferred it
// is the number of deferred deliveries still to be recorded.
func Backlog(ctx context.Context, pool *pgxpool.Pool, queues ...string) (map[string]int64, error) {
	out := make(map[string]int64, len(queues))
	for _, q := range queues {
		out[q] = 0
	}
	rows, err := pool.Query(ctx, `SELECT queue, count(*) FROM river_job
WHERE state IN ('available', 'pending', 'retryable', 'running', 'scheduled') GROUP BY queue`)
	if err != nil {
		return nil, fmt.Errorf("job backlog: %w", err)
	}
	var (
		queue string
		n     int64
	)
	_, err = pgx.ForEachRow(rows, []any{&queue, &n}, func() error {
		out[queue] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("job backlog: %w", err)
	}
	return out, nil
}
