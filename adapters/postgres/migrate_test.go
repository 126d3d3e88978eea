package postgres_test

import (
	"os"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
)

// migrationFiles lists migrations/ as it is on disk, which is what Migrate embeds. Later issues add
// files; the tests must not need editing for that.
func migrationFiles(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("migrations")
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sql") {
			names = append(names, strings.TrimSuffix(e.Name(), ".sql"))
		}
	}
	require.Contains(t, names, "0001_event_store")
	require.Contains(t, names, "0002_receipts")
	return names
}

func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t, pgtest.NewEmptyDatabaseURL(t))
	ctx := testCtx(t)
	allMigrations := migrationFiles(t)

	pending, err := postgres.Pending(ctx, pool)
	require.NoError(t, err)
	assert.Equal(t, allMigrations, pending, "a new database needs everything")

	require.NoError(t, postgres.Migrate(ctx, pool))
	require.NoError(t, postgres.Migrate(ctx, pool), "a second run finds nothing to do")

	pending, err = postgres.Pending(ctx, pool)
	require.NoError(t, err)
	assert.Empty(t, pending)
	assert.NotNil(t, pending)
	assert.Equal(t, len(allMigrations), count(t, pool, `SELECT count(*) FROM schema_migrations WHERE version_id > 0 AND is_applied`))
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM pg_extension WHERE extname = 'btree_gist'`))
}

// TestMigrateConcurrently: several `serve` processes starting at once.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabaseURL(t)
	ctx := testCtx(t)
	allMigrations := migrationFiles(t)
	const runners = 6
	var wg sync.WaitGroup
	errs := make([]error, runners)
	start := make(chan struct{})
	for i := range runners {
		pool := pgtest.Open(t, url) // one pool per process
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = postgres.Migrate(ctx, pool)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "runner %d", i)
	}
	pool := pgtest.Open(t, url)
	assert.Equal(t, len(allMigrations), count(t, pool, `SELECT count(*) FROM schema_migrations WHERE version_id > 0 AND is_applied`))
	pending, err := postgres.Pending(ctx, pool)
	require.NoError(t, err)
	assert.Empty(t, pending)
}

// TestMigrationFailureRollsBack: a failing file leaves nothing of itself behind and is retried by the
// next run; adding a file is all it takes to extend the schema.
func TestMigrationFailureRollsBack(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t, pgtest.NewEmptyDatabaseURL(t))
	ctx := testCtx(t)
	fsys := fstest.MapFS{
		"migrations/0001_first.sql":  {Data: []byte("-- +goose Up\nCREATE TABLE first (id int);\nINSERT INTO first VALUES (1);")},
		"migrations/0002_second.sql": {Data: []byte("-- +goose Up\nCREATE TABLE second (id int);\nSELECT no_such_function();")},
	}
	err := postgres.MigrateFS(ctx, pool, fsys)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "0002_second")
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM first`))
	assert.Equal(t, 0, count(t, pool, `SELECT count(*) FROM pg_tables WHERE tablename = 'second'`), "the failed file is rolled back whole")
	pending, err := postgres.PendingFS(ctx, pool, fsys)
	require.NoError(t, err)
	assert.Equal(t, []string{"0002_second"}, pending)

	fsys["migrations/0002_second.sql"] = &fstest.MapFile{Data: []byte("-- +goose Up\nCREATE TABLE second (id int);")}
	fsys["migrations/0003_third.sql"] = &fstest.MapFile{Data: []byte("-- +goose Up\nALTER TABLE second ADD COLUMN name text;")}
	require.NoError(t, postgres.MigrateFS(ctx, pool, fsys))
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM first`), "0001 is not run twice")
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM information_schema.columns WHERE table_name = 'second' AND column_name = 'name'`))
	pending, err = postgres.PendingFS(ctx, pool, fsys)
	require.NoError(t, err)
	assert.Empty(t, pending)
}

// TestOlderMigrationsRefuseANewerSchema: a binary that embeds fewer migrations than the database
// holds (an old release after a newer one migrated) refuses, naming what it does not know; the newer
// set migrates on, and a binary with every version is content.
func TestOlderMigrationsRefuseANewerSchema(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t, pgtest.NewEmptyDatabaseURL(t))
	ctx := testCtx(t)
	older := fstest.MapFS{
		"migrations/0001_first.sql": {Data: []byte("-- +goose Up\nCREATE TABLE first (id int);")},
	}
	newer := fstest.MapFS{
		"migrations/0001_first.sql":  older["migrations/0001_first.sql"],
		"migrations/0002_second.sql": {Data: []byte("-- +goose Up\nCREATE TABLE second (id int);")},
		"migrations/0070_third.sql":  {Data: []byte("-- +goose Up\nCREATE TABLE third (id int);")},
	}
	require.NoError(t, postgres.CheckNotNewerFS(ctx, pool, older), "an empty database is not newer than anything")
	require.NoError(t, postgres.MigrateFS(ctx, pool, older))
	require.NoError(t, postgres.MigrateFS(ctx, pool, newer))

	err := postgres.MigrateFS(ctx, pool, older)
	require.ErrorIs(t, err, postgres.ErrSchemaNewer)
	assert.Contains(t, err.Error(), "migration(s) 0002, 0070, which this binary does not know")
	assert.ErrorIs(t, postgres.CheckNotNewerFS(ctx, pool, older), postgres.ErrSchemaNewer)
	pending, err := postgres.PendingFS(ctx, pool, older)
	require.NoError(t, err)
	assert.Empty(t, pending, "nothing of its own is missing: the refusal is about the versions it lacks")
	assert.NoError(t, postgres.MigrateFS(ctx, pool, newer), "the newer binary is fine")
}

func TestMigrationNamesAreChecked(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t, pgtest.NewEmptyDatabaseURL(t))
	ctx := testCtx(t)
	for _, name := range []string{"migrations/1_short.sql", "migrations/0001-dash.sql", "migrations/0001_Upper.sql"} {
		fsys := fstest.MapFS{name: {Data: []byte("SELECT 1;")}}
		err := postgres.MigrateFS(ctx, pool, fsys)
		assert.ErrorContains(t, err, "name must look like", name)
		_, err = postgres.PendingFS(ctx, pool, fsys)
		assert.Error(t, err, name)
	}
}

// TestMigrateRefusesRestoredFutureTransactionIDs: events restored from a cluster further along than
// this one would sort after every new event; Migrate (run by serve at start) must refuse.
func TestMigrateRefusesRestoredFutureTransactionIDs(t *testing.T) {
	t.Parallel()
	_, pool := newStore(t)
	ctx := testCtx(t)
	require.NoError(t, postgres.Migrate(ctx, pool))
	require.NoError(t, postgres.CheckTransactionIDs(ctx, pool))

	_, err := pool.Exec(ctx, `INSERT INTO streams VALUES ('booking-restored', 1)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO events (tx_id, stream_id, version, event_id, event_type)
		VALUES ('21474836480'::xid8, 'booking-restored', 1, gen_random_uuid(), 'x.v1')`) // epoch 5
	require.NoError(t, err)
	err = postgres.Migrate(ctx, pool)
	require.ErrorIs(t, err, postgres.ErrTransactionIDsBehind)
	assert.Contains(t, err.Error(), "pg_resetwal -e 6")
	assert.ErrorIs(t, postgres.CheckTransactionIDs(ctx, pool), postgres.ErrTransactionIDsBehind)
}
