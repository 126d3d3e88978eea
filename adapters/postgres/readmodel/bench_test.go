package readmodel_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/eventlogtest"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/projections"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// benchEvents generates about n events of a month of bookings on 200 hosts: creates, cancels,
// no-shows, Calendly reschedule pairs, and Stripe payments (some refunded) on payment streams. They
// come back shuffled, so a stream's events are spread over the log as deliveries would spread them.
func benchEvents(n int) []booking.Event {
	r := rand.New(rand.NewPCG(2027, 3))
	var out []booking.Event
	clock := day.AddDate(0, 0, -40)
	tick := func() time.Time { clock = clock.Add(time.Duration(1+r.IntN(30)) * time.Second); return clock }
	slotFor := func(i int) booking.Slot {
		start := day.AddDate(0, 0, r.IntN(30)).Add(time.Duration(9*60+15*r.IntN(32)) * time.Minute)
		return slot(fmt.Sprintf("bench-ev-%d", i), start, []int{30, 60}[r.IntN(2)], fmt.Sprintf("bench-host-%d", r.IntN(200)))
	}
	for i := 0; len(out) < n; i++ {
		b := booking.ID(fmt.Sprintf("calendly-bench-%d", i))
		sc := booking.Scheduled{Slot: slotFor(i), Capacity: 1}
		pay := r.IntN(5) == 0
		if pay {
			sc.PaymentRefs = []string{fmt.Sprintf("stripe:ch_%d", i)}
		}
		out = append(out, event(b, "created", tick(), sc))
		switch x := r.IntN(10); {
		case x < 2:
			out = append(out, canceled(b, tick(), "invitee canceled"))
		case x < 3:
			nb := booking.ID(fmt.Sprintf("calendly-bench-%d-r", i))
			t := tick()
			out = append(out, event(b, "canceled", t, booking.Canceled{Reason: "rescheduled", CanceledBy: "invitee", RescheduledTo: nb}),
				event(nb, "created", t.Add(time.Microsecond), booking.Scheduled{Slot: slotFor(i), Capacity: 1, RescheduledFrom: b}))
		case x < 4:
			out = append(out, event(b, "no-show", tick(), booking.NoShowMarked{}))
		}
		if pay {
			ps := booking.ID(fmt.Sprintf("stripe-pi_%d", i))
			refs := []string{fmt.Sprintf("stripe:pi_%d", i), fmt.Sprintf("stripe:ch_%d", i)}
			out = append(out, event(ps, "succeeded", tick(), booking.PaymentSucceeded{Refs: refs, Amount: 5000, Currency: "eur"}))
			if r.IntN(3) == 0 {
				out = append(out, event(ps, "refunded", tick(), booking.PaymentRefunded{Refs: refs, Amount: 5000, Currency: "eur"}))
			}
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// seedLog appends events one per append (as deliveries do), from a few writers at once.
func seedLog(tb testing.TB, e *env, events []booking.Event) {
	tb.Helper()
	codec := eventcodec.JSON{}
	work := make(chan booking.Event)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range work {
				data, err := codec.Encode(ev)
				if err == nil {
					_, err = e.store.Append(context.Background(), ev.Booking.Stream(), eventlog.Any(), []eventlog.EventData{data})
				}
				if err != nil {
					errs <- err
					for range work {
					}
					return
				}
			}
		}()
	}
	for _, ev := range events {
		work <- ev
	}
	close(work)
	wg.Wait()
	close(errs)
	require.NoError(tb, <-errs)
	e.waitReadable(tb)
}

// BenchmarkRebuild replays a log of BOOKINGLEDGER_BENCH_EVENTS events (default 50000) into an empty
// read model. events/s is the rebuild rate (target: 50000); because the machine is shared, each
// iteration also times a plain scan of the same log (ReadAll in batches of the same size, no decoding)
// and reports rebuild-time/scan-time, which two runs can compare. "buffered" is the normal path;
// "chunk=1000" computes the calendar in chunks of 1,000 bookings instead of 20,000.
func BenchmarkRebuild(b *testing.B) {
	n := envInt("BOOKINGLEDGER_BENCH_EVENTS", 50000)
	e := newEnvOn(b, eventlogtest.StorePostgres) // docs/benchmarks.md measures the PostgreSQL store
	seedLog(b, e, benchEvents(n))
	var stored int64
	require.NoError(b, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM events`).Scan(&stored))
	for _, c := range []struct {
		name  string
		chunk int
	}{{"buffered", 0}, {"chunk=1000", 1000}} {
		b.Run(c.name, func(b *testing.B) {
			// As serve and the CLI build it on PostgreSQL: the store copies the replay (Options.Log).
			rm := readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{RebuildChunk: c.chunk, Log: e.log()})
			var rebuild, scan time.Duration
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				require.NoError(b, rm.Rebuild(context.Background(), nil))
				rebuild += time.Since(start)
				b.StopTimer()
				start = time.Now()
				scanned := scanLog(b, e.store, readmodel.RebuildBatchSize)
				scan += time.Since(start)
				require.Equal(b, stored, scanned)
				b.StartTimer()
			}
			b.StopTimer()
			cp, err := rm.Checkpoint(context.Background())
			require.NoError(b, err)
			require.Equal(b, stored, cp.EventsApplied)
			b.ReportMetric(float64(stored)*float64(b.N)/rebuild.Seconds(), "events/s")
			b.ReportMetric(float64(stored)*float64(b.N)/scan.Seconds(), "scan-events/s")
			b.ReportMetric(rebuild.Seconds()/scan.Seconds(), "rebuild/scan")
		})
	}
}

func scanLog(tb testing.TB, store eventlog.Store, batch int) int64 {
	tb.Helper()
	var (
		n   int64
		pos eventlog.Position
	)
	for {
		events, err := store.ReadAll(context.Background(), pos, batch)
		require.NoError(tb, err)
		n += int64(len(events))
		if len(events) < batch {
			return n
		}
		pos = events[len(events)-1].Position
	}
}

// BenchmarkProjectionLag measures, per delivery, the time from the ledger's commit (what the 2xx
// waits for) to the booking being visible through the read model's Booking query, with the runner
// following the store's subscription. Run it with a fixed count, e.g. -benchtime=300x.
func BenchmarkProjectionLag(b *testing.B) {
	e := newEnvOn(b, eventlogtest.StorePostgres)
	seedLog(b, e, benchEvents(envInt("BOOKINGLEDGER_BENCH_BACKGROUND", 5000)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runner := e.rm.Runner(projections.RunnerOptions{Subscriber: e.store})
	done := make(chan struct{})
	go func() { defer close(done); _ = runner.Run(ctx) }()
	require.Eventually(b, func() bool { return runner.Status().Active }, time.Minute, time.Millisecond)
	waitApplied(b, e) // the background log is projected before timing starts

	lags := make([]time.Duration, 0, b.N)
	commits := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		id := booking.ID(fmt.Sprintf("calendly-lag-%d-%d", b.N, i))
		start := time.Now()
		e.deliver(b, one(string(id), created(id, at(-1, 0).Add(time.Duration(i)*time.Second),
			slot(string(id), at(9, 0), 30, fmt.Sprintf("lag-host-%d", i%50)))))
		committed := time.Now()
		commits = append(commits, committed.Sub(start))
		for {
			if _, err := e.rm.Booking(context.Background(), id); err == nil {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
		lags = append(lags, time.Since(committed))
	}
	b.StopTimer()
	cancel()
	<-done
	slices.Sort(lags)
	slices.Sort(commits)
	pct := func(d []time.Duration, p float64) float64 {
		return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(lags, 0.5), "p50-ms")
	b.ReportMetric(pct(lags, 0.99), "p99-ms")
	b.ReportMetric(pct(lags, 1), "max-ms")
	// The ledger's own commit (what a webhook's 2xx waits for), measured in the same run.
	b.ReportMetric(pct(commits, 0.5), "commit-p50-ms")
	b.ReportMetric(pct(commits, 0.99), "commit-p99-ms")
}

// BenchmarkApplyOneBooking times the calendar's incremental batch at its smallest, which is every
// batch at one sender: one new booking, one event, applied by Apply on a calendar of
// BOOKINGLEDGER_BENCH_BACKGROUND (5,000) events. The bookings are recorded before the timer starts and
// applied one batch each, so only the batches are timed: its reads, writes and commit, whose cost is
// mostly the round trips to the database.
func BenchmarkApplyOneBooking(b *testing.B) {
	e := newEnvOn(b, eventlogtest.StorePostgres)
	seedLog(b, e, benchEvents(envInt("BOOKINGLEDGER_BENCH_BACKGROUND", 5000)))
	e.catchUp(b)
	ctx := context.Background()
	pos, err := e.rm.Load(ctx)
	require.NoError(b, err)
	for i := range b.N {
		id := booking.ID(fmt.Sprintf("calendly-one-%d-%d", b.N, i))
		e.deliver(b, one(string(id), created(id, at(-1, 0).Add(time.Duration(i)*time.Second),
			slot(string(id), at(10, 0).Add(time.Duration(i/50)*time.Hour), 30, fmt.Sprintf("one-host-%d", i%50)))))
	}
	var fresh []eventlog.RecordedEvent
	for len(fresh) < b.N {
		page, err := e.store.ReadAll(ctx, pos, 1000)
		require.NoError(b, err)
		if len(page) == 0 {
			time.Sleep(time.Millisecond) // an older transaction still holds the rest back
			continue
		}
		fresh, pos = append(fresh, page...), page[len(page)-1].Position
	}
	b.ResetTimer()
	for i := range b.N {
		require.NoError(b, e.rm.Apply(ctx, fresh[i:i+1]))
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/batch")
}
