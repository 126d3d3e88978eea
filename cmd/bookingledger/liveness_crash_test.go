package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/email/smtpsink"
	"bookingledger/adapters/httpapi/sample"
)

// TestKilledServeResumesStepsAndDeliveriesInSeconds (issue #36): serve is killed with SIGKILL while
// an email step's SMTP conversation is stalled before its data (at RCPT), another's exactly at the
// end of its data (the server read the final dot and has not answered), a calendar PUT and relay
// attempts are stalled too. Neither River's rescue (--jobs-rescue-after, 5 min by default) nor the
// steps' leases (twice the 20 s call timeout) may be waited out: within 10 s of the restart every
// step and every delivery is finished. The email stalled before its data was provably not sent and is
// sent (once); only the one stalled at the end of its data is unknown, and goes to reconciliation
// with a note that says so. No email, calendar object or webhook-id is missing; no email twice.
//
// Two ways back: the killed serve is restarted ("restart"), or a second serve that was already
// running notices the death ("survivor"); the 10 s run from the restart or from the kill.
func TestKilledServeResumesStepsAndDeliveriesInSeconds(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	for _, survivor := range []bool{false, true} {
		name := "restart"
		if survivor {
			name = "survivor"
		}
		t.Run(name, func(t *testing.T) { killedServeResumes(t, survivor) })
	}
}

func killedServeResumes(t *testing.T, survivor bool) {
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseAll)
	stall := func(stalled *atomic.Int32) {
		stalled.Add(1)
		<-release
	}
	var rcpts, dataEnds, puts, hooks atomic.Int32
	var stalledRcpt, stalledEnd, stalledPut, stalledHook atomic.Int32
	var endStalledBody atomic.Value
	w := newStepsWorld(t, nil, func(r *http.Request) int {
		if r.Method == http.MethodPut && puts.Add(1) == 1 {
			stall(&stalledPut)
		}
		return 0
	})
	// The sink is built by newStepsWorld; its RCPT hook is set here, before any serve runs.
	require.NoError(t, w.smtp.Close())
	var err error
	w.smtp, err = smtpsink.Start(smtpsink.Config{
		Fault: func(m smtpsink.Message) smtpsink.Fault {
			if dataEnds.Add(1) == 1 {
				endStalledBody.Store(string(m.Data))
				stall(&stalledEnd)
			}
			return smtpsink.Accept
		},
		OnRcpt: func(string) {
			if rcpts.Add(1) == 1 {
				stall(&stalledRcpt)
			}
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.smtp.Close() })
	w.vars[envSMTPAddr] = w.smtp.Addr()
	w.vars[envStepsCallTimeout] = "20s"
	w.vars["BOOKINGLEDGER_RELAY_ALLOW_PRIVATE"] = "true"
	w.vars["BOOKINGLEDGER_RELAY_SCHEDULE"] = "0s,200ms,200ms,1s,1s"

	var mu sync.Mutex
	seen := map[string]int{}
	receiver := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if hooks.Add(1) <= 2 {
			stall(&stalledHook)
		}
		mu.Lock()
		seen[r.Header.Get("webhook-id")]++
		mu.Unlock()
	}))
	t.Cleanup(receiver.Close)
	t.Cleanup(releaseAll) // before the receiver closes (cleanups run last-in first-out)

	bin := buildBinary(t)
	cmd, base := startServeBinary(t, bin, w.vars)
	out, errOut, code := cli(t, w.env(), "endpoints", "add", "--url", receiver.URL)
	require.Equal(t, 0, code, out+errOut)

	const n = 3
	for i := range n {
		d, err := sample.Build("calendly", "invitee.created", demoCalendlyKey, sample.Params{Booking: fmt.Sprintf("live-%d", i), Host: fmt.Sprintf("host-%d", i)}, time.Now())
		require.NoError(t, err)
		req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/calendly", bytes.NewReader(d.Body))
		req.Header = d.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	waitFor(t, 60*time.Second, "an email stalled before its data, one at its end, a PUT and relay attempts", func() (bool, string) {
		// Every other step finished: none is inside its own unknown window at the kill.
		var done int
		require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT count(*) FROM process_steps WHERE state = 'done'`).Scan(&done))
		return stalledRcpt.Load() == 1 && stalledEnd.Load() == 1 && stalledPut.Load() == 1 && stalledHook.Load() >= 1 && done == 2*n-3,
			fmt.Sprintf("rcpt %d, end of data %d, put %d, hooks %d, steps done %d", stalledRcpt.Load(), stalledEnd.Load(), stalledPut.Load(), stalledHook.Load(), done)
	})
	if survivor {
		// Started while the first holds every step and delivery: it has nothing to take until then.
		_, _ = startServeBinary(t, bin, w.vars)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	killed := time.Now()
	// The stalled peers go on as real ones would: the message read to its dot is accepted (the
	// killed sender never hears it), the PUT is stored, the webhooks are taken.
	releaseAll()

	restarted := killed
	if !survivor {
		_, _ = startServeBinary(t, bin, w.vars)
		restarted = time.Now()
	}
	ctx := context.Background()
	db := w.db(t)
	var states string
	for {
		var open, deliveries, succeeded int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state IN ('pending', 'requested')), string_agg(kind || '=' || state, ' ' ORDER BY id) FROM process_steps`).Scan(&open, &states))
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'succeeded') FROM relay_deliveries`).Scan(&deliveries, &succeeded))
		if open == 0 && deliveries > 0 && succeeded == deliveries {
			break
		}
		require.Less(t, time.Since(restarted), 10*time.Second,
			"steps and deliveries still open 10 s after the restart (or the kill, with a survivor): %s; deliveries %d of %d succeeded", states, succeeded, deliveries)
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("resumed %.1fs after the restart (or the kill): %s", time.Since(restarted).Seconds(), states)

	// Exactly the email stalled at its end of data is unknown; the other two were sent, once each.
	body, _ := endStalledBody.Load().(string)
	var unknown []string
	rows, err := db.Query(ctx, `SELECT booking, note FROM process_steps WHERE state = 'needs_reconciliation'`)
	require.NoError(t, err)
	for rows.Next() {
		var booking, note string
		require.NoError(t, rows.Scan(&booking, &note))
		assert.Contains(t, body, "Reference: "+booking, "only the email stalled at its end of data is unknown")
		assert.Contains(t, note, "end of data", note)
		unknown = append(unknown, booking)
	}
	require.NoError(t, rows.Err())
	assert.Len(t, unknown, 1)
	var done int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM process_steps WHERE state = 'done'`).Scan(&done))
	assert.Equal(t, 2*n-1, done)
	perID := map[string]int{}
	for _, m := range w.smtp.Messages() {
		perID[m.MessageID]++
	}
	assert.Len(t, perID, n, "every booking's email reached the server")
	for id, c := range perID {
		assert.Equal(t, 1, c, "email %s once", id)
	}
	assert.Len(t, w.dav.Store.Objects(), n, "one calendar object per booking")
	mu.Lock()
	defer mu.Unlock()
	var ids int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM relay_deliveries`).Scan(&ids))
	assert.Len(t, seen, ids, "every webhook-id reached the receiver")
	assert.False(t, strings.Contains(states, "failed"), states)
}

// TestLostDatabaseMidCallIsRetriedNotReconciled (issue #36): every database connection of serve is
// terminated (pg_terminate_backend) while one email's SMTP conversation is stalled before its data
// and another's exactly at the end of its data. Neither is a stopped worker: the first is sent when
// the conversation goes on (or, had its end of data not been recorded, never ended and retried), the
// second's answer is recorded once the database is back. Every step ends done, none in
// reconciliation, each email once, and relay deliveries complete.
func TestLostDatabaseMidCallIsRetriedNotReconciled(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseAll)
	var rcpts, dataEnds, stalled atomic.Int32
	w := newStepsWorld(t, nil, nil)
	require.NoError(t, w.smtp.Close())
	var err error
	w.smtp, err = smtpsink.Start(smtpsink.Config{
		Fault: func(smtpsink.Message) smtpsink.Fault {
			if dataEnds.Add(1) == 1 {
				stalled.Add(1)
				<-release
			}
			return smtpsink.Accept
		},
		OnRcpt: func(string) {
			if rcpts.Add(1) == 1 {
				stalled.Add(1)
				<-release
			}
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.smtp.Close() })
	w.vars[envSMTPAddr] = w.smtp.Addr()
	w.vars[envStepsCallTimeout] = "20s"
	bin := buildBinary(t)
	_, base := startServeBinary(t, bin, w.vars)

	const n = 3
	for i := range n {
		d, err := sample.Build("calendly", "invitee.created", demoCalendlyKey, sample.Params{Booking: fmt.Sprintf("lost-%d", i), Host: fmt.Sprintf("host-%d", i)}, time.Now())
		require.NoError(t, err)
		req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/calendly", bytes.NewReader(d.Body))
		req.Header = d.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	waitFor(t, 60*time.Second, "one email stalled before its data, one at its end", func() (bool, string) {
		return stalled.Load() == 2, fmt.Sprintf("stalled %d", stalled.Load())
	})
	ctx := context.Background()
	db := w.db(t)
	var killed int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&killed))
	t.Logf("terminated %d connections of serve", killed)
	require.Positive(t, killed)
	releaseAll()

	waitFor(t, 60*time.Second, "every step done", func() (bool, string) {
		var open int
		var states string
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state <> 'done'), string_agg(kind || '=' || state, ' ' ORDER BY id) FROM process_steps`).Scan(&open, &states))
		return open == 0 && strings.Count(states, "=done") == 2*n, states
	})
	var items int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM reconciliation_items WHERE kind = 'step'`).Scan(&items))
	assert.Zero(t, items, "a lost database is not an unknown outcome")
	perID := map[string]int{}
	for _, m := range w.smtp.Messages() {
		perID[m.MessageID]++
	}
	assert.Len(t, perID, n)
	for id, c := range perID {
		assert.Equal(t, 1, c, "email %s once", id)
	}
}
