package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/caldav/caldavsink"
	"bookingledger/adapters/email/smtpsink"
	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/postgres/pgtest"
)

const (
	// envStepBenchDeliveries sets the bookings of one BenchmarkStepLagAtRate round.
	envStepBenchDeliveries     = "BOOKINGLEDGER_BENCH_STEP_DELIVERIES"
	defaultStepBenchDeliveries = 2000
	stepBenchRate              = 200 // bookings per second, open loop
	stepBenchWorkers           = 32  // BOOKINGLEDGER_STEPS_WORKERS: each step waits on its target most of its time
)

// BenchmarkStepLagAtRate measures step completion lag: from a create's acknowledgement to the last of
// its two steps (calendar object, confirmation email) being done, with fast sinks (the in-process
// CalDAV and SMTP servers), while new bookings arrive open loop at 200/s. serve runs in process, as
// `serve` wires it, with 32 step workers. Reported: p50 and p99 lag in ms, overall and per half of the
// run (a lag that grows from the first half to the second is steps falling behind); the part of it
// until the steps were planned (planned-*: the calendar and process projections) and the wait from
// planned to a worker's claim (queued-*); and the share of bookings whose steps finished. The load
// starts as soon as serve listens, on a fresh database; a second round of as many bookings follows on
// the same serve once the first one's steps are finished, reported as warm-*: the first round's lag
// includes serve's first seconds, the second's is that of a serve that has been running. Each round
// also reports its CPU per booking from /proc, from the first booking sent to the last step done:
// cpu-us/booking (this process — serve, the sinks, the load generator — and the cluster) and
// pg-us/booking (the cluster's part).
// Not run by make test; `make bench` runs it (BOOKINGLEDGER_BENCH_STEP_DELIVERIES per round).
func BenchmarkStepLagAtRate(b *testing.B) {
	n := defaultStepBenchDeliveries
	if v, err := strconv.Atoi(os.Getenv(envStepBenchDeliveries)); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		b.StopTimer()
		smtp, err := smtpsink.Start(smtpsink.Config{})
		if err != nil {
			b.Fatal(err)
		}
		dav, err := caldavsink.Start(caldavsink.Config{})
		if err != nil {
			b.Fatal(err)
		}
		dbURL := pgtest.NewEmptyDatabaseURL(b)
		vars := map[string]string{
			"BOOKINGLEDGER_DATABASE_URL":          dbURL,
			"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
			"BOOKINGLEDGER_ADMIN_ADDR":            "127.0.0.1:0",
			"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
			"BOOKINGLEDGER_LOG_LEVEL":             "error",
			"BOOKINGLEDGER_MASTER_KEY":            testMasterKey,
			envSMTPAddr:                           smtp.Addr(),
			envSMTPFrom:                           "bookings@bench.localhost",
			envCalDAVURLTemplate:                  dav.URL() + "/dav/{resource}/bookings/",
			envStepsAllowPrivate:                  "true",
			envStepsWorkers:                       strconv.Itoa(stepBenchWorkers),
		}
		ctx, cancel := context.WithCancel(context.Background())
		stdout := newAddrWriter()
		done := make(chan error, 1)
		go func() { done <- run(ctx, []string{"serve"}, envOf(vars), stdout, &lockedBuffer{}) }()
		var base string
		select {
		case a := <-stdout.Addr:
			base = "http://" + a
		case err := <-done:
			b.Fatalf("serve exited: %v", err)
		case <-time.After(60 * time.Second):
			b.Fatal("serve did not start")
		}
		pool, err := pgxpool.New(ctx, dbURL)
		if err != nil {
			b.Fatal(err)
		}

		// The load generator keeps its connections, as the other benchmarks' do: a new connection per
		// request (http.DefaultClient keeps two idle) cost the two cores it shares with serve about
		// 0.2 ms per booking of dialing, on both sides.
		client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
		r := stepLagRound{ctx: ctx, pool: pool, client: client, base: base, n: n, postmaster: clusterPostmaster(b, pool)}
		// The first round meets a serve that has just started: new connections plan their statements,
		// the tables are empty and the job queue starts. The second runs on the same serve once the
		// first is done: the lag of a serve that has been running (warm-*).
		b.StartTimer()
		r.run(b, "lag-", "")
		b.StopTimer()
		r.run(b, "warm-lag-", "warm-")
		pool.Close()
		client.CloseIdleConnections()
		cancel()
		<-done
		_ = smtp.Close()
		_ = dav.Close()
	}
}

// reportQuantiles reports the p50 and p99 of lags (ms) as prefix+"p50-ms" and prefix+"p99-ms".
func reportQuantiles(b *testing.B, lags []float64, prefix string) {
	if len(lags) == 0 {
		return
	}
	slices.Sort(lags)
	b.ReportMetric(lags[len(lags)/2], prefix+"p50-ms")
	b.ReportMetric(lags[min(len(lags)-1, len(lags)*99/100)], prefix+"p99-ms")
}

// stepLagRound sends rounds of bookings at stepBenchRate to a running serve and reports their lag.
type stepLagRound struct {
	ctx        context.Context
	pool       *pgxpool.Pool
	client     *http.Client
	base       string
	n          int
	postmaster string // "": the cluster's CPU is not reported
	round      int
}

// cpu returns the CPU ticks used so far by this process (serve, the sinks, the load generator) and
// by the cluster; ok is false when the cluster's are not readable.
func (r *stepLagRound) cpu() (self, cluster int64, ok bool) {
	self, ok = procTicks(strconv.Itoa(os.Getpid()), false)
	if r.postmaster == "" || !ok {
		return 0, 0, false
	}
	cluster, ok = clusterTicks(r.postmaster)
	return self, cluster, ok
}

// run sends n new bookings (ids prefixed id), waits until their steps are finished, and reports the
// lag of those whose two steps were done, each metric prefixed with prefix.
func (r *stepLagRound) run(b *testing.B, id, prefix string) {
	ctx, n := r.ctx, r.n
	r.round++
	// Build every delivery first: signing is not what is measured.
	start := time.Date(2032, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(r.round, 0, 0)
	bodies := make([]sample.Delivery, n)
	var err error
	for i := range bodies {
		if bodies[i], err = sample.Build("calendly", "invitee.created", demoCalendlyKey,
			sample.Params{Booking: fmt.Sprintf("%s%d", id, i), Host: fmt.Sprintf("lag-host-%d", i%50), Start: start.Add(time.Duration(i) * time.Hour)}, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	self0, cluster0, cpuOK := r.cpu()
	acked := make([]time.Time, n)
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / stepBenchRate)
	for i := range bodies {
		<-tick.C
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, r.base+"/webhooks/calendly", bytes.NewReader(bodies[i].Body))
			req.Header = bodies[i].Header.Clone()
			resp, err := r.client.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					acked[i] = time.Now()
				}
			}
		})
	}
	tick.Stop()
	wg.Wait()
	like := "calendly-" + id + "%"
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var open, total int
		if err := r.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state NOT IN ('done', 'failed', 'skipped', 'needs_reconciliation')), count(*)
FROM process_steps WHERE booking LIKE $1`, like).Scan(&open, &total); err == nil && open == 0 && total >= 2*n {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if self1, cluster1, ok := r.cpu(); ok && cpuOK {
		// From the first booking sent to the last step done: the whole system's cost of a booking.
		us := func(ticks int64) float64 { return float64(ticks) * 1e6 / ticksPerSecond / float64(n) }
		b.ReportMetric(us(self1-self0+cluster1-cluster0), prefix+"cpu-us/booking")
		b.ReportMetric(us(cluster1-cluster0), prefix+"pg-us/booking")
	}
	// Per booking: when its steps were planned (the process projection), first claimed (a worker
	// took the job) and all done — so the lag splits into following the log and waiting for a worker.
	rows, err := r.pool.Query(ctx, `SELECT booking, min(created_at), max(requested_at), max(finished_at) FROM process_steps
WHERE state = 'done' AND booking LIKE $1 GROUP BY booking HAVING count(*) = 2`, like)
	if err != nil {
		b.Fatal(err)
	}
	type times struct{ planned, requested, finished time.Time }
	finished := map[string]times{}
	for rows.Next() {
		var id string
		var t times
		if err := rows.Scan(&id, &t.planned, &t.requested, &t.finished); err != nil {
			b.Fatal(err)
		}
		finished[id] = t
	}
	rows.Close()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	// Lag per half of the run: a lag that grows from the first half to the second means the steps
	// fall behind the arrival rate, however small the overall median.
	var lags, first, second, planned, queued []float64
	for i, at := range acked {
		if t, ok := finished[fmt.Sprintf("calendly-%s%d", id, i)]; ok && !at.IsZero() {
			lag := ms(t.finished.Sub(at))
			lags = append(lags, lag)
			if i < n/2 {
				first = append(first, lag)
			} else {
				second = append(second, lag)
			}
			planned = append(planned, ms(t.planned.Sub(at)))
			queued = append(queued, ms(t.requested.Sub(t.planned)))
		}
	}
	reportQuantiles(b, lags, prefix)
	reportQuantiles(b, first, prefix+"first-half-")
	reportQuantiles(b, second, prefix+"second-half-")
	reportQuantiles(b, planned, prefix+"planned-")
	reportQuantiles(b, queued, prefix+"queued-")
	b.ReportMetric(float64(len(lags))/float64(n), prefix+"completed-ratio")
}
