package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/httpapi/anchor"
	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/privacy"
	"bookingledger/adapters/providers/calendly"
)

const (
	// envAnchorServe makes the test binary serve the hand-written handler (package anchor) instead of
	// running tests: BenchmarkServeVsHandwritten starts it as a process of its own. The handler's
	// database is BOOKINGLEDGER_DATABASE_URL, its Calendly key BOOKINGLEDGER_CALENDLY_SIGNING_KEYS.
	envAnchorServe = "BOOKINGLEDGER_BENCH_ANCHOR_SERVE"
	// envAnchorDuration is how long each point of BenchmarkServeVsHandwritten loads its server (a Go
	// duration; default 3s), envAnchorRounds how many alternated rounds it runs (default 3).
	envAnchorDuration = "BOOKINGLEDGER_BENCH_ANCHOR_DURATION"
	envAnchorRounds   = "BOOKINGLEDGER_BENCH_ANCHOR_ROUNDS"
	anchorKey         = "anchor-bench-calendly-key"
	// anchorPoolMaxConns is the hand-written handler's pool: serve's default (defaultPoolMaxConns).
	anchorPoolMaxConns = defaultPoolMaxConns
)

func TestMain(m *testing.M) {
	if os.Getenv(envAnchorServe) == "1" {
		if err := serveAnchor(); err != nil {
			fmt.Fprintln(os.Stderr, "anchor:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	flag.Parse()
	if run := flag.Lookup("test.run"); run != nil && run.Value.String() == "" {
		// The whole package runs, the tests that run the real binary among them: it builds while the
		// first tests run instead of in the first one that needs it.
		go buildOnce.Do(buildTheBinary)
	}
	code := m.Run()
	buildOnce.Do(func() {}) // a build still running has finished: binaryDir is known
	if binaryDir != "" {
		_ = os.RemoveAll(binaryDir)
	}
	os.Exit(code)
}

// serveAnchor is the hand-written handler as a process: POST /webhooks/calendly on
// BOOKINGLEDGER_ADDR, "listening on ADDR" on stdout once it accepts, until SIGTERM.
func serveAnchor() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg, err := pgxpool.ParseConfig(os.Getenv("BOOKINGLEDGER_DATABASE_URL"))
	if err != nil {
		return err
	}
	cfg.MaxConns = anchorPoolMaxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, anchor.Schema); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", os.Getenv("BOOKINGLEDGER_ADDR"))
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/calendly", &anchor.Handler{Pool: pool, Key: []byte(os.Getenv("BOOKINGLEDGER_CALENDLY_SIGNING_KEYS"))})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("listening on %s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// benchProcess is a server under load: its process and where it listens.
type benchProcess struct {
	cmd   *exec.Cmd
	base  string // public listener, http://HOST:PORT
	admin string // admin listener (serve only), http://HOST:PORT
}

// startBenchProcess starts cmd (its output to a file in a temporary directory, not to the benchmark's
// process) and waits for "listening on ADDR" (and "admin listening on ADDR" when serve prints it).
func startBenchProcess(b *testing.B, cmd *exec.Cmd) *benchProcess {
	b.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(b.TempDir(), "stderr.log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &benchProcess{cmd: cmd}
	ready := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if a, ok := strings.CutPrefix(lines.Text(), "admin listening on "); ok {
				p.admin = "http://" + a
			} else if a, ok := strings.CutPrefix(lines.Text(), "listening on "); ok {
				p.base = "http://" + a
				close(ready)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		out, _ := os.ReadFile(logf.Name())
		b.Fatalf("%s did not print its address within 60s\n%s", cmd.Path, out)
	}
	return p
}

// stop ends the process with SIGTERM (SIGKILL after 30 s) and waits for it.
func (p *benchProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// procTicks is a process's user+system CPU time in clock ticks from /proc/PID/stat; with children,
// also that of its waited-for children (cutime+cstime).
func procTicks(pid string, children bool) (int64, bool) {
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state): field k is f[k-3]
	if len(f) < 15 {
		return 0, false
	}
	sum := int64(0)
	last := 12 // utime (14), stime (15)
	if children {
		last = 14 // cutime (16), cstime (17)
	}
	for k := 11; k <= last; k++ {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return 0, false
		}
		sum += v
	}
	return sum, true
}

// clusterTicks is the CPU of a whole PostgreSQL cluster: the postmaster's own, that of the children
// it has reaped (cutime+cstime: a backend that ends mid-measurement is counted there), and that of
// every live child (backends, WAL writer, checkpointer, ...). ok is false when the postmaster is
// not readable from here (a cluster on another host).
func clusterTicks(postmaster string) (int64, bool) {
	sum, ok := procTicks(postmaster, true)
	if !ok {
		return 0, false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(raw)
		i := strings.LastIndexByte(s, ')')
		if f := strings.Fields(s[i+1:]); i < 0 || len(f) < 2 || f[1] != postmaster {
			continue
		}
		if t, ok := procTicks(e.Name(), false); ok {
			sum += t
		}
	}
	return sum, true
}

// clusterPostmaster returns the PID of the postmaster of pool's cluster, read from its data directory;
// "" (logged) when that is not readable from here (a cluster on another host).
func clusterPostmaster(b *testing.B, pool *pgxpool.Pool) string {
	var dataDir string
	if err := pool.QueryRow(context.Background(), "SHOW data_directory").Scan(&dataDir); err != nil {
		b.Logf("no data directory (%v): PostgreSQL's CPU is not reported", err)
		return ""
	}
	raw, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		b.Logf("postmaster.pid not readable (%v): PostgreSQL's CPU is not reported", err)
		return ""
	}
	postmaster, _, _ := strings.Cut(string(raw), "\n")
	b.Logf("cluster %s, postmaster %s", dataDir, postmaster)
	return postmaster
}

// ticksPerSecond is USER_HZ, the unit of /proc/PID/stat's times: 100 on every Linux architecture Go
// builds for.
const ticksPerSecond = 100

// cpuSample is the CPU used so far by the server, the cluster and this process (the load generator).
type cpuSample struct{ server, cluster, loadgen int64 }

// BenchmarkServeVsHandwritten measures the whole `bookingledger serve` as shipped from outside, against
// the hand-written handler (package anchor) as a process of its own, both over loopback HTTP from this
// process: serve is the real binary built from cmd/bookingledger with its defaults (the calendar,
// process and relay projections running; no step target, no relay endpoint; a pool of 20), the handler
// is this test binary re-run with BOOKINGLEDGER_BENCH_ANCHOR_SERVE=1 (a pool of 20 too). Each gets a
// database of its own on the one cluster. In BOOKINGLEDGER_BENCH_ANCHOR_ROUNDS rounds (default 3), at
// concurrency 1, 8 and 32, serve then the handler: each point starts its server, warms it up
// (50 deliveries, 4×concurrency at c=32, and serve's projections caught up: the backends' caches
// and PL/pgSQL functions are per connection), then sends signed Calendly
// invitee.created bodies (each a new booking at its own slot) from a closed loop of that many senders
// for BOOKINGLEDGER_BENCH_ANCHOR_DURATION (default 3s), waits until serve's projections have applied
// every event (its /metrics: bookingledger_projection_events_behind 0), and stops the server. Only one
// server runs at a time, so the cluster's CPU is that server's.
//
// Reported per point: deliveries/s (over the load), p50-ms and p99-ms (ack latency), and CPU per
// delivery from /proc (utime+stime) over the load and the projections' catch-up: server-us/delivery
// (the server's process), pg-us/delivery (every process of the cluster), loadgen-us/delivery (this
// process), total-us/delivery (server + PostgreSQL), and drain-ms (last ack to projections caught up;
// 0 for the handler), and idle-cpu-ms/s (server + PostgreSQL CPU in one second with no load, after the
// warm-up: serve's pollers; it is part of the figures per delivery too). scripts/bench.sh prints the
// ratios against the targets. BOOKINGLEDGER_BENCH_BINARY serves with another build (benchBinary).
//
//	go test -run '^$' -bench '^BenchmarkServeVsHandwritten$' -benchtime 1x ./cmd/bookingledger/
func BenchmarkServeVsHandwritten(b *testing.B) {
	dur := 3 * time.Second
	if v := os.Getenv(envAnchorDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("%s: %v", envAnchorDuration, err)
		}
		dur = d
	}
	rounds := 3
	if v := os.Getenv(envAnchorRounds); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s: want a positive count, got %q", envAnchorRounds, v)
		}
		rounds = n
	}
	serveURL := pgtest.NewEmptyDatabaseURL(b)
	anchorURL := pgtest.NewEmptyDatabaseURL(b)
	bin := benchBinary(b)
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}

	pool := pgtest.Open(b, serveURL)
	postmaster := clusterPostmaster(b, pool)
	pool.Close()

	start := map[string]func(b *testing.B) *benchProcess{
		"serve": func(b *testing.B) *benchProcess {
			cmd := exec.Command(bin, "serve")
			cmd.Env = append(os.Environ(),
				privacy.EnvMasterKey+"="+testMasterKey,
				"BOOKINGLEDGER_DATABASE_URL="+serveURL,
				"BOOKINGLEDGER_ADDR=127.0.0.1:0",
				"BOOKINGLEDGER_ADMIN_ADDR=127.0.0.1:0",
				"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS="+anchorKey)
			return startBenchProcess(b, cmd)
		},
		"handwritten": func(b *testing.B) *benchProcess {
			cmd := exec.Command(self)
			cmd.Env = append(os.Environ(), envAnchorServe+"=1",
				"BOOKINGLEDGER_DATABASE_URL="+anchorURL,
				"BOOKINGLEDGER_ADDR=127.0.0.1:0",
				"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS="+anchorKey)
			return startBenchProcess(b, cmd)
		},
	}
	var seq atomic.Int64
	base := time.Now().Add(24 * time.Hour).Truncate(time.Hour)
	next := func() (sample.Delivery, error) {
		n := seq.Add(1)
		return sample.Build("calendly", calendly.EventInviteeCreated, anchorKey,
			sample.Params{Booking: fmt.Sprintf("anchor-%d", n), Start: base.Add(time.Duration(n) * time.Hour)}, time.Now())
	}
	for range rounds {
		for _, conc := range []int{1, 8, 32} {
			for _, name := range []string{"serve", "handwritten"} {
				b.Run(fmt.Sprintf("c=%d/%s", conc, name), func(b *testing.B) {
					p := start[name](b)
					defer p.stop()
					client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512}}
					defer client.CloseIdleConnections()
					send := func() error {
						d, err := next()
						if err != nil {
							return err
						}
						req, err := http.NewRequest(http.MethodPost, p.base+"/webhooks/calendly", strings.NewReader(string(d.Body)))
						if err != nil {
							return err
						}
						req.Header = d.Header.Clone()
						resp, err := client.Do(req)
						if err != nil {
							return err
						}
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							return fmt.Errorf("%s: status %d: %s", name, resp.StatusCode, body)
						}
						return nil
					}
					// Warm-up: connections opened, code paths run, serve's projections caught up.
					if _, err := loadFor(conc, max(50, 4*conc), 0, send); err != nil {
						b.Fatal(err)
					}
					if p.admin != "" {
						waitProjectionsCaughtUp(b, client, p.admin)
					}
					pid := strconv.Itoa(p.cmd.Process.Pid)
					snap := func() (cpuSample, bool) {
						var s cpuSample
						var ok1, ok2, ok3 bool
						s.server, ok1 = procTicks(pid, false)
						s.loadgen, ok2 = procTicks("self", false)
						ok3 = postmaster != ""
						if ok3 {
							s.cluster, ok3 = clusterTicks(postmaster)
						}
						return s, ok1 && ok2 && ok3
					}
					// A second idle: what the server and the cluster burn with nothing to do (serve's
					// pollers), reported apart, and included in the figures per delivery below.
					idle0, okIdle0 := snap()
					time.Sleep(time.Second)
					idle1, okIdle1 := snap()
					before, okBefore := snap()
					b.ResetTimer()
					t0 := time.Now()
					lat, err := loadFor(conc, 0, dur, send)
					elapsed := time.Since(t0)
					if err != nil {
						b.Fatal(err)
					}
					drain := time.Duration(0)
					if p.admin != "" {
						t1 := time.Now()
						waitProjectionsCaughtUp(b, client, p.admin)
						drain = time.Since(t1)
					}
					after, okAfter := snap()
					b.StopTimer()
					n := float64(len(lat))
					slices.Sort(lat)
					q := func(f float64) float64 {
						return float64(lat[min(len(lat)-1, int(f*n))].Microseconds()) / 1000
					}
					b.ReportMetric(n/elapsed.Seconds(), "deliveries/s")
					b.ReportMetric(q(0.50), "p50-ms")
					b.ReportMetric(q(0.99), "p99-ms")
					if okBefore && okAfter {
						us := func(ticks int64) float64 { return float64(ticks) * 1e6 / ticksPerSecond / n }
						b.ReportMetric(us(after.server-before.server), "server-us/delivery")
						b.ReportMetric(us(after.cluster-before.cluster), "pg-us/delivery")
						b.ReportMetric(us(after.loadgen-before.loadgen), "loadgen-us/delivery")
						b.ReportMetric(us(after.server-before.server+after.cluster-before.cluster), "total-us/delivery")
					}
					if okIdle0 && okIdle1 {
						b.ReportMetric(float64(idle1.server-idle0.server+idle1.cluster-idle0.cluster)*1000/ticksPerSecond, "idle-cpu-ms/s")
					}
					b.ReportMetric(float64(drain.Milliseconds()), "drain-ms")
					b.ReportMetric(0, "ns/op") // the figures above say it; wall time per op means nothing here
				})
			}
		}
	}
}

// loadFor runs conc closed-loop senders, each calling send again once its last call returned, until
// count calls were made (count > 0) or for d; it returns every call's latency.
func loadFor(conc, count int, d time.Duration, send func() error) ([]time.Duration, error) {
	var (
		mu     sync.Mutex
		lat    []time.Duration
		failed error
		issued atomic.Int64
		wg     sync.WaitGroup
	)
	deadline := time.Now().Add(d)
	for range conc {
		wg.Go(func() {
			var mine []time.Duration
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for {
				if count > 0 && issued.Add(1) > int64(count) || count == 0 && !time.Now().Before(deadline) {
					return
				}
				t0 := time.Now()
				if err := send(); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
		})
	}
	wg.Wait()
	if failed == nil && len(lat) == 0 {
		failed = errors.New("no delivery was answered")
	}
	return lat, failed
}

// waitProjectionsCaughtUp polls serve's /metrics until every projection's
// bookingledger_projection_events_behind is 0.
func waitProjectionsCaughtUp(b *testing.B, client *http.Client, admin string) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := client.Get(admin + "/metrics")
		if err != nil {
			b.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		seen, behind := 0, false
		for _, line := range strings.Split(string(raw), "\n") {
			if !strings.HasPrefix(line, "bookingledger_projection_events_behind{") {
				continue
			}
			seen++
			if f := strings.Fields(line); len(f) < 2 || f[len(f)-1] != "0" {
				behind = true
			}
		}
		if seen == 0 {
			b.Fatalf("%s/metrics reports no bookingledger_projection_events_behind", admin)
		}
		if !behind {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("projections still behind after 2 minutes:\n%s", raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
