package main

import (
	"context"
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
