package serve

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"
	"bookingledger/domain/eventlog"
	"bookingledger/projections"
)

// TestRebuildRebuildsTheProjectionItNames: with a second projection registered beside the calendar,
// rebuild of either name resets and replays that one and leaves the other's checkpoint alone.
func TestRebuildRebuildsTheProjectionItNames(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDatabase(t)
	_, err := pool.Exec(ctx, `CREATE TABLE seen_events (id uuid PRIMARY KEY)`)
	require.NoError(t, err)
	store := postgres.NewStore(pool)
	for i := range 7 {
		_, err := store.Append(ctx, fmt.Sprintf("test-%d", i), eventlog.NoStream(),
			[]eventlog.EventData{{ID: eventlog.EventID(uuid.New()), Type: "test.v1", Data: []byte(`{}`)}})
		require.NoError(t, err)
	}
	// ReadAll returns only events older than every running transaction of the cluster (other tests'
	// too): wait until the whole log is readable.
	require.Eventually(t, func() bool {
		events, err := store.ReadAll(ctx, eventlog.Position{}, 8)
		return err == nil && len(events) == 7
	}, time.Minute, 5*time.Millisecond)
	seen, err := checkpoint.New(pool, checkpoint.Config{
		Name: "seen",
		Apply: func(ctx context.Context, tx pgx.Tx, events []eventlog.RecordedEvent) error {
			for _, e := range events {
				if _, err := tx.Exec(ctx, `INSERT INTO seen_events (id) VALUES ($1)`, uuid.UUID(e.ID)); err != nil {
					return err
				}
			}
			return nil
		},
		Reset: func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `TRUNCATE seen_events`)
			return err
		},
	})
	require.NoError(t, err)
	registry := append(projectionRegistry(), projectionEntry{name: "seen",
		build: func(projectionDeps) (projections.Projection, error) { return seen, nil }})
	d := projectionDeps{pool: pool, events: ledgerdb.EventStore{Events: store, Receipts: store},
		calendar: readmodel.New(pool, store, eventcodec.JSON{}, readmodel.Options{})}
	d.jobs, err = stepstore.InsertOnlyClient(pool)
	require.NoError(t, err)
	for _, e := range registry {
		r, err := d.runner(e, projections.RunnerOptions{})
		require.NoError(t, err)
		n, err := r.CatchUp(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 7, n, e.name)
	}
	calendarBefore, err := checkpoint.Read(ctx, pool, readmodel.ProjectionName)
	require.NoError(t, err)

	entry, err := lookupProjection(registry, "seen")
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	require.NoError(t, rebuildProjection(ctx, d, entry, false, &stdout, &stderr))
	assert.Contains(t, stdout.String(), "rebuilt seen: 7 events in ")
	assert.Contains(t, stderr.String(), "rebuild seen: 7/7 events (100%)")
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM seen_events`).Scan(&rows))
	assert.Equal(t, 7, rows, "replayed once into the emptied table")
	calendarAfter, err := checkpoint.Read(ctx, pool, readmodel.ProjectionName)
	require.NoError(t, err)
	assert.Equal(t, calendarBefore, calendarAfter, "the calendar was not rebuilt")
	seenBefore, err := checkpoint.Read(ctx, pool, "seen")
	require.NoError(t, err)

	entry, err = lookupProjection(registry, readmodel.ProjectionName)
	require.NoError(t, err)
	stdout.Reset()
	require.NoError(t, rebuildProjection(ctx, d, entry, true, &stdout, &stderr))
	assert.Contains(t, stdout.String(), "rebuilt calendar: 7 events in ")
	seenAfter, err := checkpoint.Read(ctx, pool, "seen")
	require.NoError(t, err)
	assert.Equal(t, seenBefore, seenAfter, "the second projection was not rebuilt")
	calendarAfter, err = checkpoint.Read(ctx, pool, readmodel.ProjectionName)
	require.NoError(t, err)
	assert.Greater(t, calendarAfter.UpdatedAt, calendarBefore.UpdatedAt)

	_, err = lookupProjection(registry, "calender")
	var ue cmdline.UsageError
	require.ErrorAs(t, err, &ue)
	assert.EqualError(t, err, `rebuild: unknown projection "calender" (have calendar, process, relay, seen, or all)`)
}
