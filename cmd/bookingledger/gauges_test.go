package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/providers/acuity/acuitytest"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

// seriesValue returns the value of one series ("name" or `name{label="v"}`) in the admin listener's
// /metrics, or "missing".
func seriesValue(t *testing.T, admin, series string) string {
	t.Helper()
	_, text := httpDo(t, "", http.MethodGet, admin+"/metrics", "")
	for line := range strings.SplitSeq(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return "missing"
}

func waitSample(t *testing.T, admin, series, want string) {
	t.Helper()
	waitFor(t, 30*time.Second, series+" = "+want, func() (bool, string) {
		v := seriesValue(t, admin, series)
		return v == want, v
	})
}

// TestDatabaseGauges: the gauges of the shared database follow what happens — events waiting while no
// instance applies the projection (the stalled case the alert rule looks for), the lag going back
// to 0 once one does, open conflicts and quarantined deliveries, and the deferred-delivery backlog
// while the Acuity API is down.
func TestDatabaseGauges(t *testing.T) {
	t.Parallel() // the slowest tests of the package overlap; each has its own database and ports
	dbURL := servetest.NewDatabaseURL(t)
	api := acuitytest.New(t, demoAcuityUser, demoAcuityKey)
	api.Put(acuitytest.Appointment{ID: 77, Start: time.Date(2030, 1, 9, 10, 0, 0, 0, time.UTC),
		Duration: 30 * time.Minute, CalendarID: 4417311, Created: time.Date(2029, 12, 31, 9, 0, 0, 0, time.UTC)})
	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          dbURL,
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		"BOOKINGLEDGER_ACUITY_API_KEYS":       demoAcuityKey,
		"BOOKINGLEDGER_ACUITY_USER_ID":        demoAcuityUser,
		"BOOKINGLEDGER_ACUITY_API_URL":        api.URL,
		"BOOKINGLEDGER_DRAIN_TIMEOUT":         "5s",
	})
	// Hold the projection's lock, as a stuck runner elsewhere would: serve's runner stands by.
	pool := pgtest.Open(t, dbURL)
	lease, err := checkpoint.NewLocker(pool).TryAcquire(context.Background(), readmodel.ProjectionName)
	require.NoError(t, err)
	require.NotNil(t, lease)
	leaseHeld := true
	t.Cleanup(func() {
		if leaseHeld {
			lease.Release(context.Background())
		}
	})

	srv := startServe(t, env)
	waitSample(t, srv.Admin, `bookingledger_projection_events_behind{projection="calendar"}`, "0")
	assert.Equal(t, "0", seriesValue(t, srv.Admin, `bookingledger_projection_checkpoint_timestamp_seconds{projection="calendar"}`), "never applied")
	assert.Equal(t, "1", seriesValue(t, srv.Admin, "bookingledger_state_scrape_ok"))
	for _, kind := range []string{"conflict", "quarantined", "late_event", "step"} {
		assert.Equal(t, "0", seriesValue(t, srv.Admin, `bookingledger_reconciliation_open_items{kind="`+kind+`"}`), kind)
	}

	// Two bookings of one slot, and a third.
	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "g-1", "--start", "2030-01-08T10:00:00Z")
	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "g-2", "--start", "2030-01-08T10:00:00Z")
	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "g-3", "--start", "2030-01-08T12:00:00Z")
	waitSample(t, srv.Admin, `bookingledger_projection_events_behind{projection="calendar"}`, "3")
	assert.Equal(t, "0", seriesValue(t, srv.Admin, `bookingledger_projection_active{projection="calendar"}`))
	assert.Equal(t, "0", seriesValue(t, srv.Admin, `bookingledger_projection_checkpoint_timestamp_seconds{projection="calendar"}`),
		"events wait and the checkpoint does not move: what BookingledgerProjectionStalled looks for")

	released := time.Now()
	lease.Release(context.Background())
	leaseHeld = false
	waitSample(t, srv.Admin, `bookingledger_projection_events_behind{projection="calendar"}`, "0")
	moved, err := strconv.ParseFloat(seriesValue(t, srv.Admin, `bookingledger_projection_checkpoint_timestamp_seconds{projection="calendar"}`), 64)
	require.NoError(t, err)
	assert.InDelta(t, float64(released.Unix()), moved, 30, "the checkpoint moved when the runner applied")
	waitSample(t, srv.Admin, `bookingledger_reconciliation_open_items{kind="conflict"}`, "1")

	// A verified delivery that cannot be mapped is quarantined, counted before any listing opened its item.
	raw := filepath.Join(t.TempDir(), "body.json")
	require.NoError(t, os.WriteFile(raw, []byte(`{"event":"invitee.created","payload":{}}`), 0o600))
	send(t, env, srv.Base, "calendly", "--raw", raw)
	waitSample(t, srv.Admin, "bookingledger_receipts_quarantined", "1")
	waitSample(t, srv.Admin, `bookingledger_reconciliation_open_items{kind="quarantined"}`, "1")

	// Acuity down: the delivery is deferred and waits in the backlog until the API is back.
	waitSample(t, srv.Admin, `bookingledger_jobs_backlog{queue="deferred"}`, "0")
	api.FailAll(http.StatusServiceUnavailable)
	out := send(t, env, srv.Base, "acuity", "scheduled", "--booking", "77")
	require.Contains(t, out, `"status":"deferred"`)
	waitSample(t, srv.Admin, `bookingledger_jobs_backlog{queue="deferred"}`, "1")
	api.Recover()
	waitSample(t, srv.Admin, `bookingledger_jobs_backlog{queue="deferred"}`, "0")
	assert.Equal(t, "1", seriesValue(t, srv.Admin, "bookingledger_state_scrape_ok"))
	srv.Stop(t)
}

// TestMonitoringFilesNameServedMetrics: every bookingledger metric the alert rules and the dashboard
// use is one serve exports, so that a renamed metric cannot leave an alert that never fires.
func TestMonitoringFilesNameServedMetrics(t *testing.T) {
	t.Parallel() // the slowest tests of the package overlap; each has its own database and ports
	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          servetest.NewDatabaseURL(t),
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		"BOOKINGLEDGER_DRAIN_TIMEOUT":         "5s",
	})
	srv := startServe(t, env)
	// Traffic of each outcome, so that every labelled series exists.
	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "m-1")
	_, errOut, code := cli(t, env, "send", "calendly", "invitee.created", "--booking", "m-2", "--secret", "wrong", "--url", srv.Base)
	require.Equal(t, 1, code, errOut)
	waitFor(t, 30*time.Second, "the projection applied", func() (bool, string) {
		v := seriesValue(t, srv.Admin, `bookingledger_projection_events_behind{projection="calendar"}`)
		return v == "0", v
	})
	_, scrape := httpDo(t, "", http.MethodGet, srv.Admin+"/metrics", "")
	srv.Stop(t)

	names := regexp.MustCompile(`\b(bookingledger_[a-z_]+)`)
	dir := filepath.Join("..", "..", "docs", "operations", "monitoring")
	for _, file := range []string{"alerts.yml", "grafana-dashboard.json", "../monitoring.md"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		require.NoError(t, err)
		found := names.FindAllString(string(b), -1)
		require.NotEmpty(t, found, file)
		for _, name := range found {
			assert.Contains(t, scrape, "\n"+name, "%s names %s, which serve does not export", file, name)
		}
	}
}

// TestStepsGaugeReadsFoldedCounts: the steps gauge tells what process_steps holds without reading its
// history, and serve's sweeper folds the finished steps' counts once they pile up: 1,500 steps
// finished before serve starts are one row after its first sweep, and steps that change afterwards
// move the gauge at once.
func TestStepsGaugeReadsFoldedCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := servetest.NewDatabaseURL(t)
	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          dbURL,
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
	})
	require.NoError(t, run(ctx, []string{"migrate"}, env, io.Discard, io.Discard))
	pool := pgtest.Open(t, dbURL)
	_, err := pool.Exec(ctx, `INSERT INTO process_steps (key, kind, thread, booking, answers, state)
SELECT gen_random_uuid(), 'host_calendar.create', 'calendly-g' || n, 'calendly-g' || n, 'active', CASE WHEN n <= 1500 THEN 'done' ELSE 'pending' END
FROM generate_series(1, 1510) n`)
	require.NoError(t, err)
	finishRows := func() int64 {
		var n int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM process_step_finishes`).Scan(&n))
		return n
	}
	require.EqualValues(t, 1500, finishRows(), "a row per step finished")

	srv := startServe(t, env)
	waitFor(t, 30*time.Second, "the sweeper folded the counts", func() (bool, string) {
		n := finishRows()
		return n == 1, fmt.Sprint(n, " rows")
	})
	assert.Equal(t, "1500", seriesValue(t, srv.Admin, `bookingledger_process_steps{kind="host_calendar.create",state="done"}`))
	assert.Equal(t, "10", seriesValue(t, srv.Admin, `bookingledger_process_steps{kind="host_calendar.create",state="pending"}`))
	_, err = pool.Exec(ctx, `UPDATE process_steps SET state = 'failed' WHERE booking IN ('calendly-g1', 'calendly-g2', 'calendly-g1501')`)
	require.NoError(t, err)
	assert.Equal(t, "1498", seriesValue(t, srv.Admin, `bookingledger_process_steps{kind="host_calendar.create",state="done"}`))
	assert.Equal(t, "3", seriesValue(t, srv.Admin, `bookingledger_process_steps{kind="host_calendar.create",state="failed"}`))
	assert.Equal(t, "9", seriesValue(t, srv.Admin, `bookingledger_process_steps{kind="host_calendar.create",state="pending"}`))
	assert.Equal(t, "1", seriesValue(t, srv.Admin, "bookingledger_state_scrape_ok"))
	srv.Stop(t)
}
