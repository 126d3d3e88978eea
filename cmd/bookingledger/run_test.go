package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

// The helpers shared with the serve package's tests (internal/servetest).
type (
	addrWriter   = servetest.AddrWriter
	lockedBuffer = servetest.LockedBuffer
)

func newAddrWriter() *addrWriter { return servetest.NewAddrWriter() }

var envOf = servetest.EnvOf

const demoCalendlyKey = "run-test-calendly-key"

// testMasterKey is the BOOKINGLEDGER_MASTER_KEY of the serve processes tests start (serve refuses to
// run without one).
const testMasterKey = servetest.MasterKey

func TestServeOnEphemeralPortRecordsASentDeliveryAndShutsDownCleanly(t *testing.T) {
	t.Parallel()                           // each has its own database, ports and processes
	dbURL := pgtest.NewEmptyDatabaseURL(t) // serve must migrate it itself
	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          dbURL,
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey + ",an-older-key",
		"BOOKINGLEDGER_DRAIN_TIMEOUT":         "5s",
	})
	srv := startServe(t, env)
	base := srv.Base

	resp, err := http.Get(base + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "/healthz")
	waitReady(t, base)

	send := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"send"}, append(args, "--url", base)...), env, &out, io.Discard)
		return out.String(), err
	}
	out, err := send("calendly", "invitee.created", "--booking", "e2e")
	require.NoError(t, err, out)
	assert.Contains(t, out, `"status":"accepted"`)
	assert.Contains(t, out, `"booking":"calendly-e2e"`)
	out, err = send("calendly", "invitee.created", "--booking", "e2e")
	require.NoError(t, err, out)
	assert.Contains(t, out, `"status":"duplicate"`, "the same flags send the same body")
	out, err = send("calendly", "invitee.canceled", "--booking", "e2e", "--repeat", "2")
	require.NoError(t, err, out)
	assert.Equal(t, 1, strings.Count(out, `"status":"accepted"`))
	assert.Equal(t, 1, strings.Count(out, `"status":"duplicate"`))
	raw := filepath.Join(t.TempDir(), "body.json")
	require.NoError(t, os.WriteFile(raw, []byte(`{"event":"invitee.created","payload":{}}`), 0o600))
	out, err = send("calendly", "--raw", raw)
	require.NoError(t, err, "a quarantined delivery is still acked: %s", out)
	assert.Contains(t, out, `202 Accepted {"status":"quarantined"`)
	out, err = send("calendly", "invitee.created", "--booking", "e2e-forged", "--secret", "not-configured")
	assert.Error(t, err, "a non-2xx makes send fail")
	assert.Contains(t, out, "401")

	srv.Stop(t)
	_, err = http.Get(base + "/healthz")
	assert.Error(t, err, "nothing listens after shutdown")

	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var types []string
	rows, err := conn.Query(context.Background(), `SELECT event_type FROM events WHERE stream_id = 'booking-calendly-e2e' ORDER BY version`)
	require.NoError(t, err)
	types, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"booking.scheduled.v1", "booking.canceled.v1"}, types)
	var secretRef string
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT secret_ref FROM receipts WHERE outcome = 'accepted' LIMIT 1`).Scan(&secretRef))
	assert.Equal(t, "secret 0", secretRef, "the newest key matched; the index alone, no fingerprint")

	logs := srv.Stderr.String()
	assert.Contains(t, logs, `"msg":"delivery"`)
	assert.NotContains(t, logs, demoCalendlyKey)
	assert.NotContains(t, logs, dbURL)
	for line := range strings.SplitSeq(strings.TrimSpace(logs), "\n") {
		assert.True(t, json.Valid([]byte(line)), "every log line is JSON: %s", line)
	}
}

func TestMigrateThenReadiness(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	dbURL := pgtest.NewEmptyDatabaseURL(t)
	pool := pgtest.Open(t, dbURL)
	ctx := context.Background()

	err := readiness(pool).Ready(ctx)
	require.Error(t, err, "an unmigrated database is not ready")
	assert.Contains(t, err.Error(), "pending migrations")

	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"migrate"}, envOf(map[string]string{"DATABASE_URL": dbURL}), &out, io.Discard))
	assert.Contains(t, out.String(), "applied 0001_")
	assert.NoError(t, readiness(pool).Ready(ctx))
	pending, err := postgres.Pending(ctx, pool)
	require.NoError(t, err)
	assert.Empty(t, pending)

	out.Reset()
	require.NoError(t, run(ctx, []string{"migrate"}, envOf(map[string]string{"BOOKINGLEDGER_DATABASE_URL": dbURL}), &out, io.Discard))
	assert.Contains(t, out.String(), "(0 migration(s) applied)", "migrate is idempotent")
}

func TestReadinessHidesConnectionDetails(t *testing.T) {
	pool, err := openPool(context.Background(), "postgres://bl:hunter2@127.0.0.1:1/nowhere?connect_timeout=1")
	require.NoError(t, err)
	defer pool.Close()
	err = readiness(pool).Ready(context.Background())
	require.Error(t, err)
	assert.Equal(t, "database unreachable", err.Error())
	// The cause, which only the log shows, says what failed without the password.
	nr, ok := errors.AsType[*httpapi.NotReady](err)
	require.True(t, ok, "%T", err)
	require.Error(t, nr.Cause)
	assert.Contains(t, nr.Cause.Error(), "127.0.0.1")
	assert.NotContains(t, nr.Cause.Error(), "hunter2")
}
