package main

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/privacy"
)

// startServeBinary runs the real binary's serve with vars and returns it with its base URL.
func startServeBinary(t *testing.T, bin string, vars map[string]string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), privacy.EnvMasterKey+"="+testMasterKey) // serve refuses to start without one
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		// Under make test the binary is a race build (raceEnabled): it reports a data race on stderr when
		// it happens, and a test that kills the process would otherwise never see the report.
		if out := stderr.String(); strings.Contains(out, "WARNING: DATA RACE") {
			t.Errorf("serve reported a data race:\n%s", out)
		}
	})
	addr := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if a, ok := strings.CutPrefix(lines.Text(), "listening on "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		return cmd, "http://" + a
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not print its address within 60s\n%s", stderr.String())
		return nil, ""
	}
}

// TestKilledWorkerBetweenRequestedAndDone: serve is killed with SIGKILL after both steps of a booking
// called their targets (the calendar object exists, the email went out) but before either recorded
// it. After a restart the calendar step probes (GET finds the object with its UID) and completes
// without a second PUT; the email step cannot be probed and goes to reconciliation; no second email.
func TestKilledWorkerBetweenRequestedAndDone(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	var puts atomic.Int32
	w := newStepsWorld(t, nil, func(r *http.Request) int {
		if r.Method == http.MethodPut {
			puts.Add(1)
		}
		return 0
	})
	bin := buildBinary(t)

	// The held instance's call timeout is long: a target slow to answer on a loaded machine is not an
	// attempt that ends in a retry, and the lease it takes (twice the timeout) cannot end while the test
	// watches. The restart takes the step over through the liveness check, not by waiting it out.
	held := map[string]string{envStepsTestHold: "called", envStepsCallTimeout: "30s"}
	for k, v := range w.vars {
		if _, ok := held[k]; !ok {
			held[k] = v
		}
	}
	cmd, base := startServeBinary(t, bin, held)
	d, err := sample.Build("calendly", "invitee.created", demoCalendlyKey, sample.Params{Booking: "k1"}, time.Now())
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/calendly", bytes.NewReader(d.Body))
	req.Header = d.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// Both targets were called; both steps still say requested.
	waitFor(t, 60*time.Second, "both targets called", func() (bool, string) {
		return len(w.smtp.Messages()) == 1 && len(w.dav.Store.Objects()) == 1, strings.Join(w.stepStates(t, "calendly-k1"), " ")
	})
	w.waitSteps(t, "calendly-k1", "host_calendar.create=requested", "invitee_email.confirmation=requested")
	emailAttempts := func() (attempts int, note string) {
		require.NoError(t, w.db(t).QueryRow(t.Context(), `SELECT attempts, note FROM process_steps WHERE kind = 'invitee_email.confirmation'`).Scan(&attempts, &note))
		return attempts, note
	}
	before, _ := emailAttempts()
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()

	restart := map[string]string{envStepsCallTimeout: "1s"}
	for k, v := range w.vars {
		if _, ok := restart[k]; !ok {
			restart[k] = v
		}
	}
	startServeBinary(t, bin, restart)
	w.waitSteps(t, "calendly-k1", "host_calendar.create=done", "invitee_email.confirmation=needs_reconciliation")
	time.Sleep(time.Second)
	assert.Len(t, w.smtp.Messages(), 1, "no second email")
	assert.EqualValues(t, 1, puts.Load(), "the probe found the object: no second PUT")
	require.Len(t, w.dav.Store.Objects(), 1)

	attempts, note := emailAttempts()
	assert.Equal(t, 1, before, "one claim sent the email before the kill")
	assert.Equal(t, before+1, attempts, "one claim after the restart, which found the outcome unknown")
	assert.Contains(t, note, "outcome unknown")
	var open int
	require.NoError(t, w.db(t).QueryRow(t.Context(), `SELECT count(*) FROM reconciliation_items WHERE kind = 'step' AND closed_at IS NULL`).Scan(&open))
	assert.Equal(t, 1, open)
}
