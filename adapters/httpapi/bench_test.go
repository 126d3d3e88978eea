package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/privacy"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/domain/ledger"
)

// benchMaxConns lets the 32-way run wait on PostgreSQL rather than on the pool.
const benchMaxConns = 32

// BenchmarkIngest posts signed Calendly invitee.created deliveries (each a new booking, so each
// appends an event and a receipt in one commit) over loopback HTTP to a real server on a real
// database: closed loop at concurrency 1, 8 and 32, then open loop at a fixed 1,000 requests/s, where
// latency is measured from each request's scheduled send time (so a stalled server cannot hide its
// queue). All sub-benchmarks share one server and database, so their figures compare.
//
//	go test -run '^$' -bench BenchmarkIngest -benchtime 3000x ./adapters/httpapi/
//
// With -benchtime Nx every sub-benchmark sends N deliveries (the fixed-rate one over N ms).
func BenchmarkIngest(b *testing.B) {
	_, srv := benchServer(b)
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(hs.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512}}
	var seq atomic.Int64 // bookings are unique across every run of every sub-benchmark

	build := func(b *testing.B, n int) []sample.Delivery {
		b.Helper()
		out := make([]sample.Delivery, n)
		now := time.Now()
		for i := range out {
			d, err := sample.Build("calendly", calendly.EventInviteeCreated, calendlyKey,
				sample.Params{Booking: fmt.Sprintf("bench-%d", seq.Add(1))}, now)
			if err != nil {
				b.Fatal(err)
			}
			out[i] = d
		}
		return out
	}
	deliver := func(d sample.Delivery) error {
		r, err := postTo(context.Background(), client, hs.URL, d.Provider, d.Header, d.Body)
		if err != nil {
			return err
		}
		if r.Status != http.StatusOK {
			return fmt.Errorf("status %d: %s", r.Status, r.Body)
		}
		return nil
	}

	for _, conc := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			closedLoop(b, build(b, b.N), conc, deliver)
		})
	}

	b.Run("rate=1000/s", func(b *testing.B) {
		const interval = time.Millisecond
		ds := build(b, b.N)
		lat := make([]time.Duration, b.N)
		var failed atomic.Value
		var wg sync.WaitGroup
		b.ResetTimer()
		start := time.Now()
		for i := range ds {
			due := start.Add(time.Duration(i) * interval)
			time.Sleep(time.Until(due))
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := deliver(ds[i]); err != nil {
					failed.Store(err)
					return
				}
				lat[i] = time.Since(due) // from the scheduled time: pacer lag counts as latency
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
		report(b, lat, elapsed)
	})
}

// benchMasterKey seals the benchmark's receipt bodies, as serve always does.
const benchMasterKey = "bench:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// benchServer is the ingest benchmarks' server, wired as serve wires it: the Calendly provider and the
// ledger over the PostgreSQL store, receipt bodies sealed per booking and each invitee's contact saved
// in the delivery's commit, on a fresh database whose pool lets the 32-way runs wait on PostgreSQL
// rather than on the pool.
func benchServer(b *testing.B) (*pgxpool.Pool, *httpapi.Server) {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabaseURL(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = benchMaxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	ring, err := privacy.ParseKeyring(benchMasterKey)
	if err != nil {
		b.Fatal(err)
	}
	store := postgres.NewStore(pool).WithBodySealer(privacy.NewBodies(pool, ring))
	srv, err := httpapi.New(httpapi.Config{
		Ledger:    ledger.NewService(store, eventcodec.JSON{}).WithUnreadNewStreams(1 << 16), // as serve
		Providers: []providers.Provider{calendly.New(providers.NewSecrets(calendlyKey), 0)},
		Ready:     httpapi.CheckFunc(func(context.Context) error { return nil }),
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	return pool, srv
}

// closedLoop sends ds from conc senders, each sending its next delivery when the last was answered,
// and reports throughput and latency.
func closedLoop(b *testing.B, ds []sample.Delivery, conc int, deliver func(sample.Delivery) error) {
	b.Helper()
	lat := make([]time.Duration, len(ds))
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ds) {
					return
				}
				t0 := time.Now()
				if err := deliver(ds[i]); err != nil {
					failed.Store(err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	report(b, lat, elapsed)
}

func report(b *testing.B, lat []time.Duration, elapsed time.Duration) {
	b.Helper()
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	q := func(p float64) float64 {
		i := min(len(sorted)-1, int(p*float64(len(sorted))))
		return float64(sorted[i].Microseconds()) / 1000
	}
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op") // wall time per op means little for concurrent runs; the figures above do
}
