package pgtest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
)

// A database from NewDatabase has every migration applied; one from NewEmptyDatabaseURL has none.
func TestNewDatabaseIsMigratedAndEmptyIsNot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pending, err := postgres.Pending(ctx, NewDatabase(t))
	require.NoError(t, err)
	require.Empty(t, pending)

	pending, err = postgres.Pending(ctx, Open(t, NewEmptyDatabaseURL(t)))
	require.NoError(t, err)
	require.NotEmpty(t, pending)
}

// A database with an Extra has the embedded migrations and the extra schema, copied from a template
// built once per cluster: the extra migration runs at most once however many databases are made.
func TestExtraSchemaIsInTheTemplate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var calls atomic.Int32
	extra := Extra{Name: "pgtestextra", Migrate: func(ctx context.Context, pool *pgxpool.Pool) error {
		calls.Add(1)
		_, err := pool.Exec(ctx, `CREATE TABLE pgtest_extra (id int)`)
		return err
	}}
	for range 2 {
		pool := NewDatabaseWith(t, extra)
		pending, err := postgres.Pending(ctx, pool)
		require.NoError(t, err)
		require.Empty(t, pending)
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pgtest_extra`).Scan(&n))
	}
	require.LessOrEqual(t, calls.Load(), int32(1), "none when an earlier run built the template in this cluster")

	var exists bool
	require.NoError(t, NewDatabase(t).QueryRow(ctx, `SELECT to_regclass('pgtest_extra') IS NOT NULL`).Scan(&exists))
	require.False(t, exists, "a database without the Extra has none of its schema")
}

// Test binaries building the same template at once (go test -p 2) wait for one another: each finds
// the template whole, the unfinished build of one killed halfway is dropped, and a copy of the
// template is migrated.
func TestTemplateIsBuiltOnceWhenRacedFor(t *testing.T) {
	t.Parallel()
	base := baseURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel) // after the cleanup below, which uses ctx
	name := randomName(t, templatePrefix+"0000")
	databases := func() []string {
		conn, err := pgx.Connect(ctx, base)
		require.NoError(t, err)
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE starts_with(datname, $1) ORDER BY datname`, name)
		require.NoError(t, err)
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return names
	}
	t.Cleanup(func() {
		for _, db := range databases() {
			require.NoError(t, exec(ctx, base, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"))
		}
	})
	killed := randomName(t, name+"_b")
	require.NoError(t, exec(ctx, base, "CREATE DATABASE "+pgx.Identifier{killed}.Sanitize()))

	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = buildTemplate(ctx, base, name, randomName(t, name+"_b"), postgres.Migrate) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, []string{name}, databases(), "one template, no unfinished build left")

	u := createDatabase(t, base, "TEMPLATE "+pgx.Identifier{name}.Sanitize())
	pending, err := postgres.Pending(ctx, Open(t, u))
	require.NoError(t, err)
	require.Empty(t, pending)
	err = exec(ctx, mustWithDatabase(t, base, name), "SELECT 1")
	require.Error(t, err, "the template refuses connections, which would keep CREATE DATABASE from copying it")
}

func mustWithDatabase(t *testing.T, base, name string) string {
	t.Helper()
	u, err := withDatabase(base, name)
	require.NoError(t, err)
	return u
}
