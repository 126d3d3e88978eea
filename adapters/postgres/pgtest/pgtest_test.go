package pgtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
		wg.Go(func() { errs[i] = buildTemplate(ctx, base, name, randomName(t, name+"_b")) })
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
