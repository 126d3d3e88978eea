package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/caldav/caldavsink"
	"bookingledger/adapters/email/smtpsink"
	"bookingledger/adapters/esdb/esdbtest"
	"bookingledger/adapters/eventlogtest"
	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/process"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

const demoCalcomSecret = "steps-test-calcom-secret"

// stepsWorld is a database, the selected event store and the two real protocol peers the steps act
// on, with the environment a serve needs to use them.
type stepsWorld struct {
	dbURL string
	vars  map[string]string
	smtp  *smtpsink.Sink
	dav   *caldavsink.Server
	pool  *pgxpool.Pool
}

func newStepsWorld(t *testing.T, smtpFault func(smtpsink.Message) smtpsink.Fault, davFault func(*http.Request) int) *stepsWorld {
	t.Helper()
	w := &stepsWorld{dbURL: servetest.NewDatabaseURL(t)}
	var err error
	w.smtp, err = smtpsink.Start(smtpsink.Config{Fault: smtpFault})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.smtp.Close() })
	w.dav, err = caldavsink.Start(caldavsink.Config{Fault: davFault})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.dav.Close() })
	w.vars = map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          w.dbURL,
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_ADMIN_ADDR":            "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		"BOOKINGLEDGER_CALCOM_SECRETS":        demoCalcomSecret,
		"BOOKINGLEDGER_LOG_LEVEL":             "warn",
		envSMTPAddr:                           w.smtp.Addr(),
		envSMTPFrom:                           "bookings@test.localhost",
		envCalDAVURLTemplate:                  w.dav.URL() + "/dav/{resource}/bookings/",
		envStepsAllowPrivate:                  "true",
		envStepsRetryBase:                     "50ms",
		// The default's bound: on a loaded machine the in-process sinks can take seconds to answer,
		// and an email whose answer times out is an unknown outcome (needs_reconciliation). Tests of
		// timeouts set their own.
		envStepsCallTimeout: "30s",
	}
	if eventlogtest.SelectedStore(t) == eventlogtest.StoreESDB {
		w.vars["BOOKINGLEDGER_EVENT_STORE"] = esdbtest.New(t).ConnString()
	}
	return w
}

func (w *stepsWorld) env() func(string) string { return envOf(w.vars) }

// db opens the world's database (after serve migrated it).
func (w *stepsWorld) db(t *testing.T) *pgxpool.Pool {
	t.Helper()
	if w.pool == nil {
		p, err := pgxpool.New(context.Background(), w.dbURL)
		require.NoError(t, err)
		t.Cleanup(p.Close)
		w.pool = p
	}
	return w.pool
}

// stepStates returns "kind=state" for the booking's thread, oldest first.
func (w *stepsWorld) stepStates(t *testing.T, thread string) []string {
	t.Helper()
	rows, err := w.db(t).Query(context.Background(), `SELECT kind || '=' || state FROM process_steps WHERE thread = $1 ORDER BY id`, thread)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	return out
}

func (w *stepsWorld) waitSteps(t *testing.T, thread string, want ...string) {
	t.Helper()
	waitFor(t, 60*time.Second, "steps of "+thread, func() (bool, string) {
		got := w.stepStates(t, thread)
		return strings.Join(got, " ") == strings.Join(want, " "), strings.Join(got, " ")
	})
}

// subjects lists the delivered messages' subjects, counted by their first word pair.
func kindsOf(msgs []smtpsink.Message) map[string]int {
	out := map[string]int{}
	for _, m := range msgs {
		k, _, _ := strings.Cut(m.Subject, ":")
		out[k]++
	}
	return out
}

// TestStepsActOnceUnderRedeliveryAndConcurrentCopies: a create redelivered 5 times and another
// booking's create sent as 20 concurrent copies give one email and one calendar object each; a
// cancel deletes the object and sends one cancellation; history, the steps command and metrics
// show the steps.
func TestStepsActOnceUnderRedeliveryAndConcurrentCopies(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	w := newStepsWorld(t, nil, nil)
	env := w.env()
	srv := startServe(t, env)
	start := sample.DefaultStart()

	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "s1", "--repeat", "5", "--start", start.Format(time.RFC3339))

	d, err := sample.Build("calendly", "invitee.created", demoCalendlyKey, sample.Params{Booking: "s2", Host: "host-2", Start: start}, time.Now())
	require.NoError(t, err)
	var wg sync.WaitGroup
	var ok atomic.Int32
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, srv.Base+"/webhooks/calendly", bytes.NewReader(d.Body))
			req.Header = d.Header.Clone()
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 20, ok.Load())

	for _, b := range []string{"calendly-s1", "calendly-s2"} {
		w.waitSteps(t, b, "host_calendar.create=done", "invitee_email.confirmation=done")
	}
	time.Sleep(300 * time.Millisecond) // anything late would show now
	assert.Len(t, w.smtp.Messages(), 2, "one email per booking")
	assert.Equal(t, map[string]int{"Booking confirmed": 2}, kindsOf(w.smtp.Delivered()))
	require.Len(t, w.dav.Store.Objects(), 2, "one calendar object per booking")
	for _, o := range w.dav.Store.Objects() {
		assert.True(t, o.Start.Equal(start), o.String())
		assert.True(t, strings.HasSuffix(o.Path, "/"+o.UID+".ics"), "the path is derived from the key, the UID is the key: %s", o)
	}

	// History (CLI and API) shows each step with its key, state, attempts and times.
	out, errOut, code := cli(t, env, "history", "calendly-s1")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "process steps (2)")
	assert.Regexp(t, `host_calendar.create\s+done\s+attempts 1  key [0-9a-f-]{36}`, out)
	var hist struct {
		Steps []struct {
			Key, Kind, State string
			Attempts         int
			RequestedAt      *time.Time `json:"requested_at"`
			FinishedAt       *time.Time `json:"finished_at"`
		} `json:"steps"`
	}
	getJSON(t, srv.AdminToken(t), srv.Admin+"/api/bookings/calendly-s1/history", &hist)
	require.Len(t, hist.Steps, 2)
	for _, s := range hist.Steps {
		assert.Equal(t, "done", s.State)
		assert.Equal(t, 1, s.Attempts)
		assert.NotNil(t, s.RequestedAt)
		assert.NotNil(t, s.FinishedAt)
	}
	assert.Equal(t, strings.TrimSuffix(strings.TrimPrefix(w.smtp.Messages()[0].MessageID, "<"), "@bookingledger>") != "", true)

	// Cancel: the object is gone and one cancellation goes out.
	send(t, env, srv.Base, "calendly", "invitee.canceled", "--booking", "s1", "--repeat", "2", "--start", start.Format(time.RFC3339))
	w.waitSteps(t, "calendly-s1", "host_calendar.create=done", "invitee_email.confirmation=done",
		"host_calendar.delete=done", "invitee_email.cancellation=done")
	time.Sleep(300 * time.Millisecond)
	require.Len(t, w.dav.Store.Objects(), 1)
	assert.Contains(t, w.dav.Store.Objects()[0].Path, "/dav/host-2-")
	assert.Equal(t, map[string]int{"Booking confirmed": 2, "Booking canceled": 1}, kindsOf(w.smtp.Delivered()))

	out, errOut, code = cli(t, env, "steps", "--state", "done")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "steps (6)")
	_, errOut, code = cli(t, env, "steps", "--state", "nope")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `unknown --state "nope"`)

	status, metrics := httpDo(t, "", http.MethodGet, srv.Admin+"/metrics", "")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, metrics, `bookingledger_process_steps{kind="host_calendar.create",state="done"} 2`)
	assert.Contains(t, metrics, `bookingledger_process_steps{kind="invitee_email.cancellation",state="done"} 1`)
	assert.Contains(t, metrics, `bookingledger_projection_active{projection="process"} 1`)
}

// TestStepsUnknownOutcomesGoToReconciliationAndTransientFailuresAreRetried: an SMTP connection
// dropped after the data is never resent but queued for an operator (who marks it done, or retries
// it); a CalDAV 503 is retried until it succeeds.
func TestStepsUnknownOutcomesGoToReconciliationAndTransientFailuresAreRetried(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	var drops, puts atomic.Int32
	drops.Store(2)
	w := newStepsWorld(t, func(smtpsink.Message) smtpsink.Fault {
		if drops.Add(-1) >= 0 {
			return smtpsink.DropAfterData
		}
		return smtpsink.Accept
	}, func(r *http.Request) int {
		if r.Method == http.MethodPut && puts.Add(1) <= 2 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	env := w.env()
	srv := startServe(t, env)

	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "u1")
	w.waitSteps(t, "calendly-u1", "host_calendar.create=done", "invitee_email.confirmation=needs_reconciliation")
	var attempts int
	var lastErr string
	require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT attempts, last_error FROM process_steps WHERE kind = 'host_calendar.create'`).Scan(&attempts, &lastErr))
	assert.Equal(t, 3, attempts, "two 503s, then done")
	assert.Empty(t, lastErr, "done clears the last error")
	var attemptLog string
	require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT j.errors::text FROM river_job j, process_steps s
WHERE s.kind = 'host_calendar.create' AND j.args @> jsonb_build_object('step', s.id)`).Scan(&attemptLog))
	assert.Contains(t, attemptLog, "503", "earlier attempts' errors stay in the job's attempt log")
	require.Len(t, w.dav.Store.Objects(), 1)

	time.Sleep(500 * time.Millisecond)
	require.Len(t, w.smtp.Messages(), 1, "a message whose outcome is unknown is never sent again by itself")

	// The step is in the reconciliation queue; resolving it needs an action.
	out, errOut, code := cli(t, env, "reconcile", "list", "--json")
	require.Equal(t, 0, code, errOut)
	var items struct {
		Items []struct {
			ID      int64  `json:"id"`
			Kind    string `json:"kind"`
			Booking string `json:"booking"`
			Reason  string `json:"reason"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &items), out)
	require.Len(t, items.Items, 1)
	it := items.Items[0]
	assert.Equal(t, "step", it.Kind)
	assert.Equal(t, "calendly-u1", it.Booking)
	assert.Contains(t, it.Reason, "invitee_email.confirmation")
	id := fmt.Sprint(it.ID)
	_, errOut, code = cli(t, env, "reconcile", "resolve", id, "--note", "checked")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--action")
	status, body := httpDo(t, srv.AdminToken(t), http.MethodPost, srv.Admin+"/api/reconciliation/"+id+"/resolve", `{"note":"checked"}`)
	assert.Equal(t, http.StatusBadRequest, status, "a step item is not closed without its step: %s", body)
	assert.Contains(t, body, "--action")
	status, body = httpDo(t, srv.AdminToken(t), http.MethodPost, srv.Admin+"/api/reconciliation/"+id+"/resolve", `{"note":"checked","action":"resend"}`)
	assert.Equal(t, http.StatusBadRequest, status, body)
	assert.Contains(t, body, "mark-done, retry or skip")
	_, errOut, code = cli(t, env, "reconcile", "resolve", id, "--note", "x", "--action", "resend")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `unknown --action "resend"`)
	status, body = httpDo(t, srv.AdminToken(t), http.MethodPost, srv.Admin+"/api/reconciliation/"+id+"/resolve", `{"note":"the mail server logged it as delivered","action":"mark-done"}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, `"closed_by":"operator"`)
	assert.Contains(t, body, `"resolved_by":"`+srv.AdminTokenName(t)+`"`, "the token that resolved the step is recorded")
	var resolvedBy string
	require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT resolved_by FROM reconciliation_items WHERE id = $1`, it.ID).Scan(&resolvedBy))
	assert.Equal(t, srv.AdminTokenName(t), resolvedBy)
	status, _ = httpDo(t, srv.AdminToken(t), http.MethodPost, srv.Admin+"/api/reconciliation/"+id+"/resolve", `{"note":"again","action":"mark-done"}`)
	assert.Equal(t, http.StatusConflict, status, "closed already")
	w.waitSteps(t, "calendly-u1", "host_calendar.create=done", "invitee_email.confirmation=done")

	// A second booking's email is dropped too; the operator finds it was not delivered and retries.
	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "u2", "--host", "host-u2")
	w.waitSteps(t, "calendly-u2", "host_calendar.create=done", "invitee_email.confirmation=needs_reconciliation")
	var itemID int64
	require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT id FROM reconciliation_items WHERE kind = 'step' AND closed_at IS NULL`).Scan(&itemID))
	out, errOut, code = cli(t, env, "reconcile", "resolve", fmt.Sprint(itemID), "--note", "not in the mail log", "--action", "retry", "--by", "cli:night-shift")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "by cli:night-shift: step is now pending")
	require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT resolved_by FROM reconciliation_items WHERE id = $1`, itemID).Scan(&resolvedBy))
	assert.Equal(t, "cli:night-shift", resolvedBy, "the CLI's operator is recorded")
	w.waitSteps(t, "calendly-u2", "host_calendar.create=done", "invitee_email.confirmation=done")
	assert.Len(t, w.smtp.Messages(), 3)
	assert.Len(t, w.smtp.Delivered(), 1)
	_, errOut, code = cli(t, env, "reconcile", "resolve", fmt.Sprint(itemID), "--note", "again", "--action", "retry")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "closed already")
}

// TestStepsCalendarThatNeverAnswersEndsInReconciliation: a CalDAV server that takes every request and
// never answers. Each attempt's outcome is unknown (the PUT may have been written) and its probe
// finds nothing out, so after the last attempt the step goes to an operator, never to failed: failed
// would say that nothing happened. Between attempts the step is requested with its lease ended; the
// sweep must not take that for a stopped worker (it added a job every sweep, each one more caller of
// the dead target, and the attempts never ran out).
func TestStepsCalendarThatNeverAnswersEndsInReconciliation(t *testing.T) {
	// Not parallel: its 200 ms call timeout must also let the invitee e-mail through.
	w := newStepsWorld(t, nil, func(r *http.Request) int {
		<-r.Context().Done()
		return 0
	})
	w.vars[envStepsCallTimeout] = "200ms"
	w.vars[envStepsRetryBase] = "1ms"
	env := w.env()
	srv := startServe(t, env)
	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "silent1")
	w.waitSteps(t, "calendly-silent1", "host_calendar.create=needs_reconciliation", "invitee_email.confirmation=done")
	var attempts, items, jobs int
	require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT attempts,
    (SELECT count(*) FROM reconciliation_items WHERE kind = 'step' AND booking = 'calendly-silent1' AND closed_at IS NULL),
    (SELECT count(*) FROM river_job j WHERE j.kind = $1 AND j.args @> jsonb_build_object('step', s.id))
FROM process_steps s WHERE kind = 'host_calendar.create'`, process.StepArgs{}.Kind()).Scan(&attempts, &items, &jobs))
	assert.Equal(t, process.DefaultMaxAttempts, attempts, "one job's attempts")
	assert.Equal(t, 1, items, "the step is in the reconciliation queue")
	assert.Equal(t, 1, jobs, "one job for the step: the sweep added none while it waited for its retries")
}
