package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/relay"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

// TestKilledServeKeepsEachBookingsOrder: an ordered endpoint (added with --ordered) whose receiver
// fails at random and answers slowly; serve is killed with SIGKILL part-way and restarted. Every
// booking's versions reach the receiver in order — no version is attempted before every earlier one
// was accepted, across the kill — and every delivery succeeds (a version in flight at the kill may
// arrive twice, before the next).
func TestKilledServeKeepsEachBookingsOrder(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	dbURL := servetest.NewDatabaseURL(t)
	bin := buildBinary(t)
	relayEnv := []string{"BOOKINGLEDGER_RELAY_ALLOW_PRIVATE=true",
		"BOOKINGLEDGER_RELAY_SCHEDULE=0s,100ms,100ms,100ms,100ms,100ms,200ms,200ms,200ms,200ms,200ms,200ms,1s,1s,1s,1s",
		"BOOKINGLEDGER_JOB_TIMEOUT=2s", "BOOKINGLEDGER_JOBS_RESCUE_AFTER=3s"}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 6))

	type req struct {
		booking string
		version uint64
		ok      bool
	}
	var (
		mu   sync.Mutex
		reqs []req
	)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m relay.Message
		if err := json.Unmarshal(body, &m); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		time.Sleep(10 * time.Millisecond) // attempts take a while: the kill finds some in flight
		mu.Lock()
		defer mu.Unlock()
		ok := rng.IntN(5) != 0
		reqs = append(reqs, req{booking: m.Data.Booking, version: m.Data.Version, ok: ok})
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(sink.Close)
	accepted := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, r := range reqs {
			if r.ok {
				n++
			}
		}
		return n
	}

	cmd, base := startServeProcess(t, bin, dbURL, relayEnv...)
	env := envOf(map[string]string{"BOOKINGLEDGER_DATABASE_URL": dbURL, "BOOKINGLEDGER_RELAY_ALLOW_PRIVATE": "true"})
	out, errOut, code := cli(t, env, "endpoints", "add", "--url", sink.URL, "--ordered")
	require.Equal(t, 0, code, out+errOut)
	require.Contains(t, out, "delivery: ordered")

	client := &http.Client{Timeout: 5 * time.Second}
	const bookings = 30
	events := []string{calendly.EventInviteeCreated, calendly.EventNoShowCreated, calendly.EventNoShowDeleted, calendly.EventInviteeCanceled}
	for _, ev := range events { // each booking's events in order, the bookings interleaved
		for i := range bookings {
			d, err := sample.Build("calendly", ev, crashKey,
				sample.Params{Booking: fmt.Sprintf("relay-order-%d", i), Host: "host-1"}, time.Now())
			require.NoError(t, err)
			rq, _ := http.NewRequest(http.MethodPost, base+"/webhooks/calendly", bytes.NewReader(d.Body))
			rq.Header = d.Header.Clone()
			resp, err := client.Do(rq)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
		}
	}
	n := bookings * len(events)
	deadline := time.Now().Add(60 * time.Second)
	for accepted() < n/4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	before := accepted()
	t.Logf("%d of %d messages accepted before SIGKILL", before, n)
	require.Less(t, before, n, "the kill came too late to find deliveries outstanding")

	startServeProcess(t, bin, dbURL, relayEnv...)
	pool := pgtest.Open(t, dbURL)
	ctx := context.Background()
	waitFor(t, 180*time.Second, "every delivery succeeded after the restart", func() (bool, string) {
		var total, ok int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'succeeded') FROM relay_deliveries`).Scan(&total, &ok))
		return total == n && ok == n, fmt.Sprintf("%d of %d deliveries succeeded (planned %d)", ok, n, total)
	})
	mu.Lock()
	defer mu.Unlock()
	done := map[string]uint64{} // highest accepted version per booking
	twice := 0
	for i, r := range reqs {
		require.LessOrEqualf(t, r.version, done[r.booking]+1, "request %d: %s version %d attempted before version %d was accepted",
			i, r.booking, r.version, done[r.booking]+1)
		require.GreaterOrEqualf(t, r.version, done[r.booking], "request %d: %s version %d after version %d was accepted",
			i, r.booking, r.version, done[r.booking])
		if r.ok {
			if r.version == done[r.booking] {
				twice++
			}
			done[r.booking] = r.version
		}
	}
	require.Len(t, done, bookings)
	for b, v := range done {
		require.Equalf(t, uint64(len(events)), v, "booking %s", b)
	}
	t.Logf("%d requests, %d version(s) accepted twice (in flight at the kill)", len(reqs), twice)
}
