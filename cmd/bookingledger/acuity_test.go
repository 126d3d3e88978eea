package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/providers/acuity/acuitytest"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

const (
	demoAcuityKey  = "run-test-acuity-api-key"
	demoAcuityUser = "11145481"
)

func TestAcuityConfigurationErrors(t *testing.T) {
	const dead = "postgres://bl@127.0.0.1:1/nowhere?connect_timeout=1"
	cases := []struct {
		name    string
		env     map[string]string
		message string
		absent  string
	}{
		{name: "keys without user id", env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_ACUITY_API_KEYS": "k"},
			message: "BOOKINGLEDGER_ACUITY_API_KEYS is set but BOOKINGLEDGER_ACUITY_USER_ID is not"},
		{name: "API URL with credentials", env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_ACUITY_API_KEYS": "k",
			"BOOKINGLEDGER_ACUITY_USER_ID": "1", "BOOKINGLEDGER_ACUITY_API_URL": "https://me:hunter2@acuity.example/api/v1"},
			message: "BOOKINGLEDGER_ACUITY_API_URL", absent: "hunter2"},
		{name: "API URL without scheme", env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_ACUITY_API_URL": "acuityscheduling.com/api/v1"},
			message: "BOOKINGLEDGER_ACUITY_API_URL"},
		{name: "zero deferred attempts", env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_DEFERRED_MAX_ATTEMPTS": "0"},
			message: "BOOKINGLEDGER_DEFERRED_MAX_ATTEMPTS"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"serve"}, envOf(tc.env), &stdout, &stderr)
			assert.Equal(t, 2, exitCode(err, &stderr), "error: %v", err)
			assert.Contains(t, stderr.String(), tc.message)
			if tc.absent != "" {
				assert.NotContains(t, stderr.String(), tc.absent)
			}
		})
	}
}

func TestMigrateSetsUpTheJobQueue(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	dbURL := pgtest.NewEmptyDatabaseURL(t)
	pool := pgtest.Open(t, dbURL)
	ctx := context.Background()
	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"migrate"}, envOf(map[string]string{"DATABASE_URL": dbURL}), &out, io.Discard))
	assert.Contains(t, out.String(), "applied 0020_receipts_deferred")
	assert.Contains(t, out.String(), "applied river 001")
	assert.NoError(t, readiness(pool).Ready(ctx))

	// Readiness notices River's schema too.
	_, err := pool.Exec(ctx, `DELETE FROM river_migration WHERE version = (SELECT max(version) FROM river_migration)`)
	require.NoError(t, err)
	err = readiness(pool).Ready(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pending migrations: river ")
}

// serve with Acuity against a fake Acuity API: `send acuity` posts a body with no data, the server
// fetches the appointment; while the API is down the delivery is deferred (202) and the job queue
// inside serve finishes it once the API is back.
func TestServeAcuitySendDeferAndFinish(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	dbURL := servetest.NewDatabaseURL(t)
	api := acuitytest.New(t, demoAcuityUser, demoAcuityKey)
	api.Put(acuitytest.Appointment{ID: 123, Start: time.Date(2030, 1, 7, 10, 0, 0, 0, time.FixedZone("", 3600)),
		Duration: 30 * time.Minute, CalendarID: 4417311, Created: time.Date(2029, 12, 31, 9, 0, 0, 0, time.UTC)})
	api.Put(acuitytest.Appointment{ID: 124, Start: time.Date(2030, 1, 8, 10, 0, 0, 0, time.FixedZone("", 3600)),
		Duration: 30 * time.Minute, CalendarID: 4417311, Created: time.Date(2029, 12, 31, 9, 0, 0, 0, time.UTC)})
	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":     dbURL,
		"BOOKINGLEDGER_ADDR":             "127.0.0.1:0",
		"BOOKINGLEDGER_ACUITY_API_KEYS":  demoAcuityKey,
		"BOOKINGLEDGER_ACUITY_USER_ID":   demoAcuityUser,
		"BOOKINGLEDGER_ACUITY_API_URL":   api.URL,
		"BOOKINGLEDGER_DRAIN_TIMEOUT":    "5s",
		"BOOKINGLEDGER_DEFERRED_WORKERS": "2",
	})
	srv := startServe(t, env)
	base := srv.Base
	send := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"send", "acuity"}, append(args, "--url", base)...), env, &out, io.Discard)
		return out.String(), err
	}

	out, err := send("scheduled", "--booking", "123")
	require.NoError(t, err, out)
	assert.Contains(t, out, `200 OK {"status":"accepted","booking":"acuity-123"`)
	out, err = send("changed", "--booking", "123")
	require.NoError(t, err, out)
	assert.Contains(t, out, `"status":"duplicate"`)

	// Acuity's first delivery is normal: its history points out only the duplicate "changed".
	first := getHistory(t, srv, "acuity-123")
	require.Len(t, first.Findings, 1, "%+v", first.Findings)
	assert.Equal(t, "duplicate_delivery", first.Findings[0].Kind)

	api.FailAll(http.StatusServiceUnavailable)
	out, err = send("scheduled", "--booking", "124")
	require.NoError(t, err, "a deferred delivery is acked: %s", out)
	assert.Contains(t, out, `202 Accepted {"status":"deferred"`)

	// While it waits, the deferred receipt is part of the booking's history.
	h := getHistory(t, srv, "acuity-124")
	require.Len(t, h.Receipts, 1, "%+v", h)
	assert.Equal(t, "deferred", h.Receipts[0].Outcome)
	assert.Equal(t, "acuity:scheduled:124", h.Receipts[0].DeliveryID)
	assert.Contains(t, h.Receipts[0].Reason, "HTTP 503")
	api.Recover()

	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	var reason string
	for {
		err := conn.QueryRow(context.Background(), `SELECT reason FROM receipts
WHERE outcome = 'accepted' AND delivery_id = 'acuity:scheduled:124'`).Scan(&reason)
		if err == nil {
			break
		}
		require.ErrorIs(t, err, pgx.ErrNoRows)
		require.True(t, time.Now().Before(deadline), "the deferred delivery was not finished within 30 s\n%s", srv.Stderr.String())
		time.Sleep(100 * time.Millisecond)
	}
	assert.Contains(t, reason, "for deferred receipt ")
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE stream_id = 'booking-acuity-124'`).Scan(&n))
	assert.Equal(t, 2, n)
	// Once finished, the history lists both: the deferral and the receipt that carries the events.
	deadline = time.Now().Add(30 * time.Second)
	for h = getHistory(t, srv, "acuity-124"); len(h.Events) < 2; h = getHistory(t, srv, "acuity-124") {
		require.True(t, time.Now().Before(deadline), "the booking was not projected within 30 s")
		time.Sleep(100 * time.Millisecond)
	}
	require.Len(t, h.Receipts, 2, "%+v", h)
	assert.Equal(t, []string{"deferred", "accepted"}, []string{h.Receipts[0].Outcome, h.Receipts[1].Outcome})

	srv.Stop(t)
	logs := srv.Stderr.String()
	assert.NotContains(t, logs, demoAcuityKey)
	assert.Contains(t, logs, `"msg":"delivery deferred"`)
	assert.Contains(t, logs, `"msg":"deferred delivery recorded"`)
	for line := range strings.SplitSeq(strings.TrimSpace(logs), "\n") {
		assert.True(t, strings.HasPrefix(line, "{"), "every log line is JSON: %s", line)
	}
}

// getHistory reads GET /api/bookings/{id}/history from the admin listener of srv, with its token.
func getHistory(t *testing.T, srv *servedProcess, id string) readapi.HistoryDTO {
	t.Helper()
	var h readapi.HistoryDTO
	getJSON(t, srv.AdminToken(t), srv.Admin+"/api/bookings/"+id+"/history", &h)
	return h
}
