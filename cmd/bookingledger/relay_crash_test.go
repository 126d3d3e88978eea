package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

// TestKilledServeCompletesEveryDelivery: serve is killed with SIGKILL while the relay is sending
// (the receiver is slow, so attempts are in flight); after a restart every delivery completes. The
// receiver may see a webhook-id twice (an attempt whose outcome was never recorded is made again),
// never not at all.
func TestKilledServeCompletesEveryDelivery(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	dbURL := servetest.NewDatabaseURL(t)
	bin := buildBinary(t)
	relayEnv := []string{"BOOKINGLEDGER_RELAY_ALLOW_PRIVATE=true", "BOOKINGLEDGER_RELAY_SCHEDULE=0s,200ms,200ms,200ms,200ms,1s,1s,1s,1s,1s",
		"BOOKINGLEDGER_JOB_TIMEOUT=2s", "BOOKINGLEDGER_JOBS_RESCUE_AFTER=3s"}

	var (
		mu   sync.Mutex
		seen = map[string]int{}
	)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond) // attempts take a while: the kill finds some in flight
		mu.Lock()
		seen[r.Header.Get("webhook-id")]++
		mu.Unlock()
	}))
	t.Cleanup(sink.Close)
	received := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}

	cmd, base := startServeProcess(t, bin, dbURL, relayEnv...)
	env := envOf(map[string]string{"BOOKINGLEDGER_DATABASE_URL": dbURL, "BOOKINGLEDGER_RELAY_ALLOW_PRIVATE": "true"})
	out, errOut, code := cli(t, env, "endpoints", "add", "--url", sink.URL)
	require.Equal(t, 0, code, out+errOut)

	client := &http.Client{Timeout: 5 * time.Second}
	const n = 60
	for i := range n {
		d, err := sample.Build("calendly", "invitee.created", crashKey,
			sample.Params{Booking: fmt.Sprintf("relay-crash-%d", i), Host: "host-1"}, time.Now())
		require.NoError(t, err)
		req, _ := http.NewRequest(http.MethodPost, base+"/webhooks/calendly", bytes.NewReader(d.Body))
		req.Header = d.Header.Clone()
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	// Kill while the relay is part-way through.
	deadline := time.Now().Add(30 * time.Second)
	for received() < n/4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	before := received()
	t.Logf("%d of %d webhook-ids received before SIGKILL", before, n)
	require.Less(t, before, n, "the kill came too late to find deliveries outstanding")

	startServeProcess(t, bin, dbURL, relayEnv...)
	pool := pgtest.Open(t, dbURL)
	ctx := context.Background()
	waitFor(t, 120*time.Second, "every delivery succeeded after the restart", func() (bool, string) {
		var total, ok int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'succeeded') FROM relay_deliveries`).Scan(&total, &ok))
		return total == n && ok == n, fmt.Sprintf("%d of %d deliveries succeeded (planned %d), %d ids received", ok, n, total, received())
	})
	rows, err := pool.Query(ctx, `SELECT 'msg_' || event_id::text FROM relay_deliveries`)
	require.NoError(t, err)
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	mu.Lock()
	defer mu.Unlock()
	twice := 0
	for _, id := range ids {
		assert.GreaterOrEqual(t, seen[id], 1, "webhook-id %s never reached the receiver", id)
		if seen[id] > 1 {
			twice++
		}
	}
	assert.Len(t, seen, n, "no webhook-id the ledger does not know")
	t.Logf("%d webhook-id(s) received twice (attempts in flight at the kill)", twice)
}
