package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/pgtest"
)

// TestOldBinaryRefusesANewerSchema: after a newer release applied a migration this binary does not
// embed (0079 stands for it), serve, migrate and the read commands stop with exit status 3 and name
// the version; --allow-newer-schema lets serve start anyway, with a warning.
func TestOldBinaryRefusesANewerSchema(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	dbURL := pgtest.NewEmptyDatabaseURL(t)
	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":  dbURL,
		"BOOKINGLEDGER_ADDR":          "127.0.0.1:0",
		"BOOKINGLEDGER_ADMIN_ADDR":    "127.0.0.1:0",
		"BOOKINGLEDGER_DRAIN_TIMEOUT": "5s",
		"BOOKINGLEDGER_MASTER_KEY":    testMasterKey,
	})
	_, stderr, code := cli(t, env, "migrate")
	require.Equal(t, 0, code, stderr)
	pool := pgtest.Open(t, dbURL)
	_, err := pool.Exec(context.Background(), `INSERT INTO schema_migrations (version_id, is_applied) VALUES (79, true)`)
	require.NoError(t, err)

	for _, args := range [][]string{{"serve"}, {"migrate"}, {"history", "calendly-x"}, {"reconcile", "list"}, {"rebuild"}} {
		stdout, stderr, code := cli(t, env, args...)
		assert.Equal(t, 3, code, "%v: %s", args, stderr)
		assert.Contains(t, stderr, "the database schema is newer than this binary: it has migration(s) 0079, which this binary does not know", args)
		assert.Empty(t, stdout, args)
	}

	srv := startServe(t, func(k string) string {
		if k == envAllowNewer {
			return "true"
		}
		return env(k)
	})
	waitReady(t, srv.Base)
	srv.Stop(t)
	assert.Contains(t, srv.Stderr.String(), `"unknown_migrations":"0079"`)
}
