package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sparesTB is one test's life for Spares: its cleanups run when end is called, and it fails when told.
type sparesTB struct {
	*testing.T
	failed   bool
	cleanups []func()
}

func (tb *sparesTB) Cleanup(f func()) { tb.cleanups = append(tb.cleanups, f) }
func (tb *sparesTB) Failed() bool     { return tb.failed || tb.T.Failed() }

// use runs one test on a database of s: do gets its pool and says whether that test failed.
func use(t *testing.T, s *Spares, do func(*pgxpool.Pool) (failed bool)) string {
	t.Helper()
	tb := &sparesTB{T: t}
	pool := s.Database(tb)
	var name string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT current_database()`).Scan(&name))
	tb.failed = do(pool)
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
	return name
}

// A passed test's database goes to the next test emptied: its rows gone, its sequences restarted,
// the migrations' own rows kept. A database whose test failed, whose schema or migration rows changed,
// or that is still in use is dropped, and the next test gets a new one.
func TestSparesReuseOnlyWhatEqualsAFreshDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := &Spares{}
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	exists := func(name string) bool {
		var ok bool
		require.NoError(t, NewDatabase(t).QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&ok))
		return ok
	}
	var migrations int
	first := use(t, s, func(pool *pgxpool.Pool) bool {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&migrations))
		require.Positive(t, migrations)
		_, err := pool.Exec(ctx, `INSERT INTO reconciliation_items (kind, subject, booking, reason) VALUES ('conflict', 's', 'b', 'r')`)
		require.NoError(t, err)
		return false
	})

	// Emptied, sequences restarted: the same row gets the same id again. A table made and dropped
	// again leaves the schema as it was (a new catalog stamp, the same fingerprint).
	var firstID int64
	second := use(t, s, func(pool *pgxpool.Pool) bool {
		var n, kept int
		require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM reconciliation_items), (SELECT count(*) FROM schema_migrations)`).Scan(&n, &kept))
		assert.Zero(t, n, "the last test's rows are gone")
		assert.Equal(t, migrations, kept, "the migrations' rows stay")
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO reconciliation_items (kind, subject, booking, reason) VALUES ('conflict', 's', 'b', 'r') RETURNING id`).Scan(&firstID))
		_, err := pool.Exec(ctx, `CREATE TABLE pgtest_scratch (id int); DROP TABLE pgtest_scratch`)
		require.NoError(t, err)
		return false
	})
	assert.Equal(t, first, second, "a passed test's database is reused")
	third := use(t, s, func(pool *pgxpool.Pool) bool {
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO reconciliation_items (kind, subject, booking, reason) VALUES ('conflict', 's', 'b', 'r') RETURNING id`).Scan(&id))
		assert.Equal(t, firstID, id, "sequences start again")
		return false
	})
	assert.Equal(t, first, third, "a schema changed and changed back is the fresh one")

	for _, c := range []struct {
		why string
		do  func(*pgxpool.Pool) bool
	}{
		{"the test failed", func(*pgxpool.Pool) bool { return true }},
		{"a column was added", func(pool *pgxpool.Pool) bool {
			_, err := pool.Exec(ctx, `ALTER TABLE reconciliation_items ADD COLUMN pgtest_extra int`)
			require.NoError(t, err)
			return false
		}},
		{"an index was added", func(pool *pgxpool.Pool) bool {
			_, err := pool.Exec(ctx, `CREATE INDEX pgtest_extra_idx ON reconciliation_items (note)`)
			require.NoError(t, err)
			return false
		}},
		{"a migration row was deleted", func(pool *pgxpool.Pool) bool {
			_, err := pool.Exec(ctx, `DELETE FROM schema_migrations WHERE version_id = (SELECT max(version_id) FROM schema_migrations)`)
			require.NoError(t, err)
			return false
		}},
		{"an advisory lock is held", func(pool *pgxpool.Pool) bool {
			conn, err := pool.Acquire(ctx)
			require.NoError(t, err)
			_, err = conn.Exec(ctx, `SELECT pg_advisory_lock(42)`)
			require.NoError(t, err)
			conn.Release()
			return false
		}},
	} {
		before := use(t, s, func(*pgxpool.Pool) bool { return false })
		gone := use(t, s, c.do)
		assert.Equal(t, before, gone, "%s: the spare was handed out", c.why)
		assert.False(t, exists(gone), "%s: its database is dropped", c.why)
		next := use(t, s, func(pool *pgxpool.Pool) bool {
			var n int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM reconciliation_items`).Scan(&n))
			assert.Zero(t, n)
			return false
		})
		assert.NotEqual(t, gone, next, "%s: the next test gets a new database", c.why)
	}
}
