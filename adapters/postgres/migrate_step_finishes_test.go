package postgres_test

import (
	"os"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
)

// TestStepFinishesMigrationCountsTheStepsBeforeIt: a database migrated before 0760 holds finished
// steps; after the upgrade process_step_finishes sums to them, and steps that change afterwards are
// counted by the triggers.
func TestStepFinishesMigrationCountsTheStepsBeforeIt(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t, pgtest.NewEmptyDatabaseURL(t))
	ctx := testCtx(t)
	older := fstest.MapFS{}
	for _, name := range migrationFiles(t) {
		if name < "0760" {
			data, err := os.ReadFile("migrations/" + name + ".sql")
			require.NoError(t, err)
			older["migrations/"+name+".sql"] = &fstest.MapFile{Data: data}
		}
	}
	require.NoError(t, postgres.MigrateFS(ctx, pool, older))
	_, err := pool.Exec(ctx, `INSERT INTO process_steps (key, kind, thread, booking, answers, state)
SELECT gen_random_uuid(), k, 'calendly-' || n, 'calendly-' || n, 'active', s
FROM generate_series(1, 3) n,
    unnest(ARRAY['host_calendar.create', 'invitee_email.confirmation']) k,
    unnest(ARRAY['pending', 'requested', 'done', 'failed', 'skipped', 'needs_reconciliation']) s`)
	require.NoError(t, err)

	require.NoError(t, postgres.Migrate(ctx, pool))
	_, err = pool.Exec(ctx, `UPDATE process_steps SET state = 'done' WHERE state = 'requested' AND kind = 'host_calendar.create'`)
	require.NoError(t, err)
	sums := func(sql string) map[string]int64 {
		rows, err := pool.Query(ctx, sql)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct {
			Kind, State string
			N           int64
		}])
		require.NoError(t, err)
		out := map[string]int64{}
		for _, r := range got {
			out[r.Kind+" "+r.State] = r.N
		}
		return out
	}
	want := sums(`SELECT kind, state, count(*) FROM process_steps WHERE state IN ('done', 'failed', 'skipped') GROUP BY 1, 2`)
	require.Len(t, want, 6)
	require.Equal(t, int64(6), want["host_calendar.create done"])
	require.Equal(t, want, sums(`SELECT kind, state, sum(n)::bigint FROM process_step_finishes GROUP BY 1, 2`))
}
