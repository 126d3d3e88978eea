package readmodel_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventlogtest"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/projections"
)

// TestEveryBatchStatementStaysIndexed: an incremental batch runs every statement on a generic plan
// (plan_cache_mode = force_generic_plan in its transaction), so no statement it sends may read a
// growing calendar table without an index condition. The statements are the ones the projection
// actually sent while applying the rich scenarios in small batches, with links.
func TestEveryBatchStatementStaysIndexed(t *testing.T) {
	var tr sqlTrace
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabaseURL(t))
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = &tr
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := newEnvWith(t, eventlogtest.StorePostgres, pool)

	ctx := context.Background()
	e.link(t, "person-a", "https://api.calendly.com/users/HOST-A", "https://api.calendly.com/users/HOST-B")
	e.catchUp(t) // from the start of the log: a bulk load, which plans as usual
	for seed := range uint64(3) {
		for i, d := range genScenario(seed + 1) {
			e.deliver(t, d)
			if i%3 == 0 {
				tr.on.Store(true)
				_, err := e.rm.Runner(projections.RunnerOptions{BatchSize: 2}).CatchUp(ctx)
				tr.on.Store(false)
				require.NoError(t, err)
			}
		}
	}
	tr.on.Store(true)
	e.unlink(t, "person-a", "https://api.calendly.com/users/HOST-B")
	e.catchUp(t)
	e.link(t, "person-b", "https://api.calendly.com/users/HOST-B")
	e.catchUp(t)
	tr.on.Store(false)

	sqls := tr.statements()
	for _, want := range []string{"WITH RECURSIVE seeds", "INSERT INTO calendar_slots", "INSERT INTO payment_streams",
		"UPDATE calendar_bookings b SET status", "INSERT INTO reconciliation_items", "INSERT INTO calendar_resource_links", "DELETE FROM calendar_resource_links",
		"CROSS JOIN LATERAL"} {
		require.True(t, strings.Contains(strings.Join(sqls, "\n"), want), "the scenario never sent %q", want)
	}
	readmodel.RequireIndexedGenericPlans(t, sqls)
}

// sqlTrace collects the distinct statements sent while on is set, but for transaction control and
// scripts of several statements (simple protocol, never planned as prepared statements).
type sqlTrace struct {
	on  atomic.Bool
	mu  sync.Mutex
	sql []string
}

func (tr *sqlTrace) add(sql string) {
	if !tr.on.Load() {
		return
	}
	switch strings.ToLower(strings.Fields(sql)[0]) {
	case "begin", "commit", "rollback":
		return
	}
	if strings.Contains(sql, ";") {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, s := range tr.sql {
		if s == sql {
			return
		}
	}
	tr.sql = append(tr.sql, sql)
}

func (tr *sqlTrace) statements() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.sql...)
}

func (tr *sqlTrace) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	tr.add(d.SQL)
	return ctx
}
func (tr *sqlTrace) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (tr *sqlTrace) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (tr *sqlTrace) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	tr.add(d.SQL)
}
func (tr *sqlTrace) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
