package gauges_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/gauges"
	"bookingledger/adapters/jobs"
	"bookingledger/adapters/metricstest"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/domain/eventlog"
	"bookingledger/projections/calendar"
	"bookingledger/projections/steps"
)

// TestStateCollector: one scrape reports each source's count under the names and labels
// docs/operations/monitoring.md uses — open items by kind, quarantined receipts, the backlog by
// queue (the deferred queue even when empty), each projection's lag and checkpoint time, process
// steps by kind and state (every pair, 0 where none) — and bookingledger_state_scrape_ok is 1; when a
// source fails its gauge is left out and the scrape is marked 0, the other gauges still reported (a
// slow step count once failed whole scrapes).
func TestStateCollector(t *testing.T) {
	pool := pgtest.NewDatabase(t)
	ctx := context.Background()
	_, err := jobs.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO river_job (args, kind, max_attempts, queue, state)
VALUES ('{}', 'bookingledger.other', 1, 'steps', 'available')`)
	require.NoError(t, err)
	_, err = checkpoint.Open(ctx, pool, "calendar") // the row exists: its time is set
	require.NoError(t, err)

	var failItems, failSteps bool
	src := gauges.Sources{
		Pool:        pool,
		Projections: []string{"calendar", "history"},
		OpenItems: func(context.Context) (map[calendar.ItemKind]int64, error) {
			if failItems {
				return nil, errors.New("down")
			}
			return map[calendar.ItemKind]int64{"conflict": 2, "step": 0}, nil
		},
		Quarantined: func(context.Context) (int64, error) { return 3, nil },
		Steps: func(ctx context.Context) (map[steps.Kind]map[steps.State]int64, error) {
			if failSteps {
				return nil, context.DeadlineExceeded
			}
			return map[steps.Kind]map[steps.State]int64{steps.CalendarCreate: {steps.StateDone: 4}}, nil
		},
		EventsAfter: func(_ context.Context, pos eventlog.Position, limit int64) (int64, error) {
			assert.Equal(t, int64(1_000_000), limit)
			return 7, nil
		},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(gauges.NewStateCollector(src))

	sum := func(name string, labels map[string]string) float64 { return metricstest.Sum(t, reg, name, labels) }
	assert.Equal(t, 2.0, sum("bookingledger_reconciliation_open_items", map[string]string{"kind": "conflict"}))
	assert.Equal(t, 3.0, sum("bookingledger_receipts_quarantined", nil))
	assert.Equal(t, 1.0, sum("bookingledger_jobs_backlog", map[string]string{"queue": "steps"}))
	assert.Equal(t, 0.0, sum("bookingledger_jobs_backlog", map[string]string{"queue": jobs.QueueDeferred}))
	assert.Equal(t, 14.0, sum("bookingledger_projection_events_behind", nil), "7 for each projection")
	assert.Equal(t, 7.0, sum("bookingledger_projection_events_behind", map[string]string{"projection": "history"}))
	assert.Positive(t, sum("bookingledger_projection_checkpoint_timestamp_seconds", map[string]string{"projection": "calendar"}))
	assert.Equal(t, 0.0, sum("bookingledger_projection_checkpoint_timestamp_seconds", map[string]string{"projection": "history"}),
		"never ran: 0")
	assert.Equal(t, 4.0, sum("bookingledger_process_steps", map[string]string{"kind": string(steps.CalendarCreate), "state": string(steps.StateDone)}))
	assert.Equal(t, 4.0, sum("bookingledger_process_steps", nil))
	assert.Equal(t, float64(len(steps.Kinds)*len(steps.States)), float64(series(t, reg, "bookingledger_process_steps")), "every kind and state")
	assert.Equal(t, 1.0, sum("bookingledger_state_scrape_ok", nil))

	failSteps = true
	assert.Equal(t, 0.0, sum("bookingledger_state_scrape_ok", nil))
	assert.Zero(t, series(t, reg, "bookingledger_process_steps"), "a failed count leaves its gauge out")
	assert.Equal(t, 2.0, sum("bookingledger_reconciliation_open_items", map[string]string{"kind": "conflict"}), "the other gauges are still reported")
	failSteps = false

	failItems = true
	assert.Equal(t, 0.0, sum("bookingledger_state_scrape_ok", nil))
	assert.Equal(t, 3.0, sum("bookingledger_receipts_quarantined", nil), "the other gauges are still reported")

	// Without a cheap count of the log (EventStoreDB) the events-behind gauge is left out.
	failItems = false
	src.EventsAfter = nil
	reg = prometheus.NewRegistry()
	reg.MustRegister(gauges.NewStateCollector(src))
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		assert.NotEqual(t, "bookingledger_projection_events_behind", f.GetName())
	}
	assert.Equal(t, 1.0, metricstest.Sum(t, reg, "bookingledger_state_scrape_ok", nil))
}

// series counts the series of one metric a scrape of reg gathers.
func series(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	return 0
}
