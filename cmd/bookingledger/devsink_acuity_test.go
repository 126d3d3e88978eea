package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/providers/acuity/acuitysink"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

// make run's Acuity: serve pointed at the dev sink's API records `send acuity` deliveries, a
// redelivery is a duplicate, and a cancel set through the sink's PUT is fetched and recorded.
func TestAcuityDevSinkServesTheTour(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	envFile := filepath.Join(t.TempDir(), "sinks.env")
	out := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"dev-sinks", "--only", "acuity", "--env-file", envFile}, func(string) string { return "" }, out, out)
	}()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "dev-sinks: ready") }, 10*time.Second, 10*time.Millisecond)
	raw, err := os.ReadFile(envFile)
	require.NoError(t, err)
	apiURL, ok := strings.CutPrefix(strings.TrimSpace(string(raw)), envAcuityAPIURL+"=")
	require.True(t, ok, "the sink's one env line: %s", raw)

	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":    servetest.NewDatabaseURL(t),
		"BOOKINGLEDGER_ADDR":            "127.0.0.1:0",
		"BOOKINGLEDGER_ACUITY_API_KEYS": demoAcuityKey,
		"BOOKINGLEDGER_ACUITY_USER_ID":  demoAcuityUser,
		envAcuityAPIURL:                 apiURL,
		"BOOKINGLEDGER_DRAIN_TIMEOUT":   "5s",
	})
	srv := startServe(t, env)
	waitForStartSync(t, env, "acuity")
	assert.Contains(t, send(t, env, srv.Base, "acuity", "scheduled", "--booking", "42"), `200 OK {"status":"accepted","booking":"acuity-42"`)
	assert.Contains(t, send(t, env, srv.Base, "acuity", "changed", "--booking", "42"), `"status":"duplicate"`)
	assert.Contains(t, out.String(), "acuity: appointment 42 fetched (active, 2026-12-02T11:00:00Z)")
	waitForCalendar(t, srv.AdminToken(t), srv.Admin, "2026-12-02T00:00:00Z", "2026-12-03T00:00:00Z", map[string]string{"acuity-42": "active"})

	status, body := httpDo(t, "", http.MethodPut, apiURL+"/appointments/42", `{"start":"2026-12-02T11:00:00Z","minutes":30,"calendarID":1,"canceled":true}`)
	require.Equal(t, http.StatusNoContent, status, body)
	assert.Contains(t, send(t, env, srv.Base, "acuity", "canceled", "--booking", "42"), `200 OK {"status":"accepted"`)
	waitForCalendar(t, srv.AdminToken(t), srv.Admin, "2026-12-02T00:00:00Z", "2026-12-03T00:00:00Z", map[string]string{"acuity-42": "canceled"})
	assert.Contains(t, out.String(), "acuity: appointment 42 set (canceled, 2026-12-02T11:00:00Z)")
	srv.Stop(t)
}

// The tour's Acuity booking gets its confirmation e-mail: the sink's appointment has a made-up
// client, so the invitee e-mail step has an address (before, it ended "no invitee email known").
func TestAcuityDevSinkClientGetsTheConfirmation(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	w := newStepsWorld(t, nil, nil)
	sink, err := acuitysink.Start(acuitysink.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, sink.Close()) })
	w.vars["BOOKINGLEDGER_ACUITY_API_KEYS"] = demoAcuityKey
	w.vars["BOOKINGLEDGER_ACUITY_USER_ID"] = demoAcuityUser
	w.vars[envAcuityAPIURL] = sink.URL()
	env := w.env()
	srv := startServe(t, env)
	waitForStartSync(t, env, "acuity")
	assert.Contains(t, send(t, env, srv.Base, "acuity", "scheduled", "--booking", "42"), `"status":"accepted"`)
	w.waitSteps(t, "acuity-42", "host_calendar.create=done", "invitee_email.confirmation=done")
	_, _, email := acuitysink.Contact(42)
	msgs := w.smtp.Delivered()
	require.Len(t, msgs, 1)
	assert.Equal(t, []string{email}, msgs[0].To)
	srv.Stop(t)
}

// waitForStartSync waits for the provider's sync that serve runs once at start: it lists the
// appointments the sink knows, which include one whose webhook the test is sending, so a sync that
// ran after the webhook's fetch would record the booking first and the webhook would be a duplicate.
// It polls provider_sync_state's last_run_at, what `providers status` shows as last_sync, on one
// pool: a CLI run per poll would open a pool (a new connection) every time.
func waitForStartSync(t *testing.T, env func(string) string, provider string) {
	t.Helper()
	pool := pgtest.Open(t, env(envDatabaseURL))
	defer pool.Close()
	waitFor(t, 60*time.Second, provider+"'s sync at start", func() (bool, string) {
		var ran bool
		err := pool.QueryRow(context.Background(),
			`SELECT EXISTS (SELECT 1 FROM provider_sync_state WHERE provider = $1 AND last_run_at IS NOT NULL)`, provider).Scan(&ran)
		if err != nil {
			return false, err.Error()
		}
		return ran, fmt.Sprintf("%s's last_run_at set: %t", provider, ran)
	})
}
