package readmodel_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventlogtest"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/pgtest/plantest"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/projections"
)

// TestEveryBatchStatementStaysIndexed: an incremental batch runs every statement on a generic plan
// (plan_cache_mode = force_generic_plan in its transaction), so no statement it sends may read a
// growing calendar table without an index condition. The statements are the ones the projection
// actually sent while applying the rich scenarios in small batches, with links.
func TestEveryBatchStatementStaysIndexed(t *testing.T) {
	t.Parallel()
	readmodel.PostgresOnly(t)
	tr := &plantest.Trace{Max: 1}
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabaseURL(t))
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := newEnvWith(t, eventlogtest.StorePostgres, pool)

	e.link(t, "person-a", "https://api.calendly.com/users/HOST-A", "https://api.calendly.com/users/HOST-B")
	e.catchUp(t) // from the start of the log: a bulk load, which plans as usual
	for seed := range uint64(3) {
		for i, d := range genScenario(seed + 1) {
			e.deliver(t, d)
			if i%3 == 0 {
				// Batches of two of the same events every run: a read that stopped short while the
				// cluster's other transactions held events back would pair them otherwise, and might
				// never send a statement the scenario means to check.
				e.waitVisible(t)
				tr.On.Store(true)
				e.catchUpWith(t, projections.RunnerOptions{BatchSize: 2})
				tr.On.Store(false)
			}
		}
	}
	tr.On.Store(true)
	e.unlink(t, "person-a", "https://api.calendly.com/users/HOST-B")
	e.catchUp(t)
	e.link(t, "person-b", "https://api.calendly.com/users/HOST-B")
	e.catchUp(t)
	tr.On.Store(false)

	for _, want := range []string{"WITH RECURSIVE seeds", "INSERT INTO calendar_slots", "INSERT INTO payment_streams",
		"UPDATE calendar_bookings b SET status", "INSERT INTO reconciliation_items", "INSERT INTO calendar_resource_links", "DELETE FROM calendar_resource_links",
		"CROSS JOIN LATERAL"} {
		require.Contains(t, tr.Text(), want, "the scenario never sent it")
	}
	readmodel.RequireIndexedGenericPlans(t, tr.Statements(), readmodel.PlanDatabase{
		Name: "first-run", URL: firstRunDatabase(t)})
}

// firstRunDatabase returns a database whose read model a first run loaded from a log of one booking:
// in bulk, through staging tables swapped in, as a fresh deployment's first webhook leaves it. A
// connection's first batch plans there, and keeps the plan while the tables grow.
func firstRunDatabase(t *testing.T) string {
	t.Helper()
	url := pgtest.NewDatabaseURL(t)
	e := newEnvWith(t, eventlogtest.StorePostgres, pgtest.Open(t, url))
	e.deliver(t, genScenario(1)[0])
	require.Equal(t, int64(1), e.catchUp(t), "the first run applies the one event in bulk")
	return url
}
