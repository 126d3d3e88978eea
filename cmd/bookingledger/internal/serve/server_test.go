package serve

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

// stopLog is the shared log the server's components record their stop into, in the order they stop.
type stopLog struct {
	mu    sync.Mutex
	names []string
}

func (l *stopLog) record(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names = append(l.names, name)
}

func (l *stopLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.names...)
}

// Close stops in stopOrder whatever order the components started in, skips those that never started,
// and does nothing the second time.
func TestServerCloseFollowsStopOrder(t *testing.T) {
	var log stopLog
	s := &server{stops: map[string]func(){}}
	started := []string{stopPool, stopEventStore, stopLiveness, stopJobs, stopProjections, stopSweeper, stopAdminUI, stopHTTP}
	for _, name := range started {
		if name == stopSweeper {
			continue // never started
		}
		s.onStop(name, func() { log.record(name) })
	}
	s.Close()
	want := []string{stopHTTP, stopAdminUI, stopProjections, stopJobs, stopLiveness, stopEventStore, stopPool}
	assert.Equal(t, want, log.list())
	s.Close()
	assert.Equal(t, want, log.list(), "a second Close stops nothing")
	assert.ElementsMatch(t, started, stopOrder, "stopOrder names every component once")
}

// A configuration error fails openServer before it opens anything: exit status 2, nothing to stop.
func TestOpenServerFailsFastOnConfigErrors(t *testing.T) {
	var log stopLog
	env := withEphemeralAdmin(envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL": "postgres://nobody@127.0.0.1:1/none", // never dialed
		"BOOKINGLEDGER_METRICS_AUTH": "sometimes",
	}))
	var stderr bytes.Buffer
	s, err := openServer(context.Background(), nil, env, &bytes.Buffer{}, &stderr, log.record)
	require.Error(t, err)
	assert.Nil(t, s)
	assert.Equal(t, 2, exitCode(err, &stderr), err.Error())
	assert.Empty(t, log.list())
}

// serveConnections counts the sessions other than this one on dbURL's database: serve's pool, its
// liveness lock and River's listener.
func serveConnections(t *testing.T, dbURL string) func() int {
	pool := pgtest.Open(t, dbURL)
	return func() int {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n))
		return n
	}
}

// A serve that ran stops in stopOrder once interrupted: HTTP first (Run drains it), then the admin UI,
// the sweeper, the projections, the job queue, the liveness lock, the event store and the pool; its
// instance row is gone and it holds no database session.
func TestServeStopsInStopOrder(t *testing.T) {
	dbURL := servetest.NewDatabaseURL(t)
	env := withEphemeralAdmin(envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          dbURL,
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		"BOOKINGLEDGER_DRAIN_TIMEOUT":         "5s",
		"BOOKINGLEDGER_LOG_LEVEL":             "error",
	}))
	var log stopLog
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout := newAddrWriter()
	s, err := openServer(ctx, nil, env, stdout, &lockedBuffer{}, log.record)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var addr string
	select {
	case addr = <-stdout.Addr:
	case err := <-done:
		t.Fatalf("serve stopped before it listened: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not listen")
	}
	send(t, env, "http://"+addr, "calendly", "invitee.created", "--booking", "stop-order-1")
	sessions := serveConnections(t, dbURL)
	require.Positive(t, sessions())

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the interrupt")
	}
	assert.Empty(t, log.list(), "Run drains HTTP; the rest waits for Close")
	s.Close()
	assert.Equal(t, stopOrder, log.list())
	assert.Eventually(t, func() bool { return sessions() == 0 }, 10*time.Second, 50*time.Millisecond,
		"serve's sessions are closed")
	var instances int
	require.NoError(t, pgtest.Open(t, dbURL).QueryRow(context.Background(), `SELECT count(*) FROM job_instances`).Scan(&instances))
	assert.Zero(t, instances, "the liveness row is removed")
}

// An openServer that fails late — the public address is taken, after everything else started — closes
// what it had opened, in stopOrder, and leaves no database session behind.
func TestOpenServerFailureClosesWhatItOpened(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	dbURL := servetest.NewDatabaseURL(t)
	env := withEphemeralAdmin(envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          dbURL,
		"BOOKINGLEDGER_ADDR":                  taken.Addr().String(),
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		"BOOKINGLEDGER_LOG_LEVEL":             "error",
	}))
	var log stopLog
	s, err := openServer(context.Background(), nil, env, &bytes.Buffer{}, &lockedBuffer{}, log.record)
	require.Error(t, err)
	assert.Nil(t, s)
	var opErr *net.OpError
	assert.True(t, errors.As(err, &opErr), "the listen error: %v", err)
	assert.Contains(t, err.Error(), EnvAddr)
	assert.Equal(t, stopOrder, log.list(), "everything was open: all of it is closed, in order")

	sessions := serveConnections(t, dbURL)
	assert.Eventually(t, func() bool { return sessions() == 0 }, 10*time.Second, 50*time.Millisecond,
		"serve's sessions are closed")
	var instances int
	require.NoError(t, pgtest.Open(t, dbURL).QueryRow(context.Background(), `SELECT count(*) FROM job_instances`).Scan(&instances))
	assert.Zero(t, instances, "the liveness row is removed")
}
