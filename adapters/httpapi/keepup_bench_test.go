package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/projections/calendar"
)

const (
	// envKeepUpDuration sets how long BenchmarkProjectionKeepsUp drives the ingest (a Go duration).
	envKeepUpDuration     = "BOOKINGLEDGER_BENCH_KEEPUP_DURATION"
	defaultKeepUpDuration = 60 * time.Second
	// keepUpSenders is the closed loop's concurrency: the "c=16, about 3,000 deliveries/s".
	keepUpSenders = 16
	// keepUpProbeEvery: one delivery in this many is a probe whose visibility the poller times. Probes
	// book an hour of their own in a region of the calendar no other delivery books, so that the
	// poller's window holds the probes in flight only, however far the projection falls behind.
	keepUpProbeEvery = 8
	// keepUpWindows is how many equal spans of the load the lag is also reported for, to show whether
	// it grows.
	keepUpWindows = 6
	// keepUpSettle bounds the wait for the projection to drain after the load ends.
	keepUpSettle = 2 * time.Minute
	// keepUpMaxRate bounds the probes' bookkeeping (deliveries/s the run could possibly reach).
	keepUpMaxRate = 20000
)

// BenchmarkProjectionKeepsUp asks whether the calendar projection keeps up with the fastest sustained
// ingest: keepUpSenders closed-loop senders post new Calendly bookings (each on its own host and hour)
// as fast as the server acknowledges them, for BOOKINGLEDGER_BENCH_KEEPUP_DURATION (default 60 s), on
// the server BenchmarkProjectionLagAtRate uses (ingress, read API and projection runner sharing serve's
// pool size). One delivery in keepUpProbeEvery is a probe; a poller asks GET /api/calendar for the
// probes acknowledged and not yet seen, stamping each with the answer that first shows it, as
// BenchmarkProjectionLagAtRate does (same resolution: its lagPollPause plus two poll round trips).
//
// It reports the ingest rate, the lag from ack to visible (p50, p99, max; the ack follows the commit),
// the p99 in the first and the last of keepUpWindows spans of the load (a growing lag is a projection
// that does not keep up), drain-ms (from the last ack to every probe visible), and projected/s: the
// deliveries the projection made visible per second from the first send until it had drained — the
// projection's own ceiling when it is below deliveries/s. The per-span figures are logged.
//
//	BOOKINGLEDGER_BENCH_KEEPUP_DURATION=10s go test -run '^$' -bench '^BenchmarkProjectionKeepsUp$' -benchtime 1x ./adapters/httpapi/
func BenchmarkProjectionKeepsUp(b *testing.B) {
	d := defaultKeepUpDuration
	if v := os.Getenv(envKeepUpDuration); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			b.Fatalf("%s=%q: want a positive Go duration such as 60s", envKeepUpDuration, v)
		}
	}
	lr := newLagRun(b)
	// Untimed: opens the connections and prepares the statements, as BenchmarkProjectionLagAtRate does.
	if _, err := lr.round(b, "keepup-warmup", lagWarmup); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for r := range b.N {
		k := newKeepUp(lr, fmt.Sprintf("keepup-%d", r), d)
		if err := k.run(b); err != nil {
			b.Fatal(err)
		}
		if r == b.N-1 {
			k.report(b)
		}
	}
}

// keepUp is one run of BenchmarkProjectionKeepsUp.
type keepUp struct {
	lr       *lagRun
	prefix   string
	duration time.Duration
	// Probe p books the hour probeBase + p hours; every other delivery books an hour from otherBase
	// on, far enough away never to share a calendar window with a probe.
	probeBase, otherBase time.Time

	seq     atomic.Int64 // deliveries started
	probes  atomic.Int64 // probes started
	acked   []atomic.Int64
	seen    []atomic.Int64 // unix ns, 0 until then
	lastAck atomic.Int64

	start, loadEnd, drained time.Time
	delivered               int64
}

func newKeepUp(lr *lagRun, prefix string, d time.Duration) *keepUp {
	if lr.base.IsZero() {
		lr.base = sample.DefaultStart()
	}
	maxProbes := int(d.Seconds()*keepUpMaxRate)/keepUpProbeEvery + 1
	k := &keepUp{lr: lr, prefix: prefix, duration: d, probeBase: lr.base,
		otherBase: lr.base.Add(time.Duration(maxProbes+1) * time.Hour),
		acked:     make([]atomic.Int64, maxProbes), seen: make([]atomic.Int64, maxProbes)}
	// Later rounds (and other benchmarks of this server) start after everything this one may book.
	lr.base = k.otherBase.Add(time.Duration(keepUpMaxRate*d.Seconds()+1) * time.Hour)
	return k
}

func (k *keepUp) probeKey(p int) string { return fmt.Sprintf("%s-p%d", k.prefix, p) }

// run drives the load for k.duration, then waits for the projection to show every probe.
func (k *keepUp) run(b *testing.B) error {
	pollCtx, stopPolling := context.WithCancel(context.Background())
	defer stopPolling()
	loadDone := make(chan struct{})
	pollErr := make(chan error, 1)
	go func() { pollErr <- k.poll(pollCtx, loadDone) }()

	var (
		wg     sync.WaitGroup
		failed atomic.Value
	)
	k.start = time.Now()
	stop := k.start.Add(k.duration)
	for range keepUpSenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) && failed.Load() == nil {
				if err := k.deliverNext(); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	k.loadEnd = time.Unix(0, k.lastAck.Load())
	k.delivered = k.seq.Load()
	close(loadDone)
	if err, _ := failed.Load().(error); err != nil {
		stopPolling()
		<-pollErr
		return err
	}
	if err := <-pollErr; err != nil {
		return err
	}
	return nil
}

// deliverNext builds and posts the next delivery: a probe every keepUpProbeEvery.
func (k *keepUp) deliverNext() error {
	n := k.seq.Add(1) - 1
	probe := -1
	var p sample.Params
	if n%keepUpProbeEvery == 0 {
		probe = int(k.probes.Add(1) - 1)
		if probe >= len(k.acked) {
			return fmt.Errorf("more than %d deliveries/s: raise keepUpMaxRate", keepUpMaxRate)
		}
		key := k.probeKey(probe)
		p = sample.Params{Booking: key, Host: "keepup-host-" + key, Start: k.probeBase.Add(time.Duration(probe) * time.Hour)}
	} else {
		key := fmt.Sprintf("%s-%d", k.prefix, n)
		p = sample.Params{Booking: key, Host: "keepup-host-" + key, Start: k.otherBase.Add(time.Duration(n) * time.Hour)}
	}
	d, err := sample.Build("calendly", calendly.EventInviteeCreated, calendlyKey, p, time.Now())
	if err != nil {
		return err
	}
	r, err := postTo(context.Background(), k.lr.ingest, k.lr.baseURL, "calendly", d.Header, d.Body)
	if err == nil && r.Status != http.StatusOK {
		err = fmt.Errorf("delivery %d: status %d: %s", n, r.Status, r.Body)
	}
	if err != nil {
		return err
	}
	now := time.Now().UnixNano()
	if probe >= 0 {
		k.acked[probe].Store(now)
	}
	for last := k.lastAck.Load(); now > last && !k.lastAck.CompareAndSwap(last, now); last = k.lastAck.Load() {
	}
	return nil
}

// poll asks the calendar for the window from the earliest probe not seen to the latest started, until
// the load is over and every probe has been seen.
func (k *keepUp) poll(ctx context.Context, loadDone <-chan struct{}) error {
	var giveUp <-chan time.Time
	done := loadDone
	lo := 0
	for {
		select {
		case <-done:
			done, giveUp = nil, time.After(keepUpSettle)
		case <-ctx.Done():
			return ctx.Err()
		case <-giveUp:
			return fmt.Errorf("%d of %d probes not visible in /api/calendar %s after the load ended",
				int(k.probes.Load())-lo, k.probes.Load(), keepUpSettle)
		default:
		}
		started := int(k.probes.Load())
		if done == nil && lo == started {
			k.drained = k.loadEnd
			for i := range lo {
				k.drained = later(k.drained, time.Unix(0, k.seen[i].Load()))
			}
			return nil
		}
		if started == 0 || lo == started {
			time.Sleep(lagPollPause)
			continue
		}
		from := k.probeBase.Add(time.Duration(lo) * time.Hour)
		to := k.probeBase.Add(time.Duration(started) * time.Hour)
		if to.Sub(from) > calendar.MaxCalendarWindow {
			to = from.Add(calendar.MaxCalendarWindow)
		}
		entries, err := k.lr.calendar(ctx, from, to)
		t1 := time.Now().UnixNano()
		if err != nil {
			return err
		}
		for _, e := range entries {
			i, err := strconv.Atoi(strings.TrimPrefix(e.Booking, "calendly-"+k.prefix+"-p"))
			if err != nil || i >= started {
				return fmt.Errorf("calendar shows booking %q, which is not a probe of this run", e.Booking)
			}
			k.seen[i].CompareAndSwap(0, t1)
		}
		for lo < started && k.seen[lo].Load() != 0 {
			lo++
		}
		time.Sleep(lagPollPause)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// report writes the run's figures (see BenchmarkProjectionKeepsUp) and logs them per span of the load.
func (k *keepUp) report(b *testing.B) {
	probes := int(k.probes.Load())
	span := k.duration / keepUpWindows
	windows := make([][]time.Duration, keepUpWindows)
	counts := make([]int, keepUpWindows)
	var lags []time.Duration
	for p := range probes {
		acked, seen := time.Unix(0, k.acked[p].Load()), time.Unix(0, k.seen[p].Load())
		lag := max(seen.Sub(acked), 0) // seen before its ack arrived: no lag
		lags = append(lags, lag)
		w := min(int(acked.Sub(k.start)/span), keepUpWindows-1)
		windows[w] = append(windows[w], lag)
		counts[w]++
	}
	loadSecs := k.loadEnd.Sub(k.start).Seconds()
	b.ReportMetric(float64(k.delivered)/loadSecs, "deliveries/s")
	b.ReportMetric(float64(k.delivered)/k.drained.Sub(k.start).Seconds(), "projected/s")
	b.ReportMetric(lagPercentile(lags, 0.50), "lag-p50-ms")
	b.ReportMetric(lagPercentile(lags, 0.99), "lag-p99-ms")
	b.ReportMetric(lagPercentile(lags, 1), "lag-max-ms")
	b.ReportMetric(lagPercentile(windows[0], 0.99), "lag-p99-first-ms")
	b.ReportMetric(lagPercentile(windows[keepUpWindows-1], 0.99), "lag-p99-last-ms")
	b.ReportMetric(float64(max(k.drained.Sub(k.loadEnd), 0).Microseconds())/1000, "drain-ms")
	b.ReportMetric(0, "ns/op") // the run's length is set by the duration; the figures above are the result
	for w := range keepUpWindows {
		b.Logf("span %d (%4.0f–%4.0f s): %6.0f deliveries/s  lag p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms",
			w+1, (time.Duration(w) * span).Seconds(), (time.Duration(w+1) * span).Seconds(),
			float64(counts[w]*keepUpProbeEvery)/span.Seconds(),
			lagPercentile(windows[w], 0.5), lagPercentile(windows[w], 0.99), lagPercentile(windows[w], 1))
	}
	b.Logf("%d deliveries in %.1f s (%d probes); drained %.0f ms after the last ack", k.delivered, loadSecs, probes,
		float64(max(k.drained.Sub(k.loadEnd), 0).Microseconds())/1000)
}
