package relay_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"bookingledger/adapters/relay"
	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
)

const (
	benchRate = 1000 // events per second, open loop
	// benchAppenders are concurrent ledger writers, as many as the store's group commit takes in flight
	// (two groups of 32): with 32 the open loop fell behind whenever a commit took over 32 ms.
	benchAppenders = 64
	benchWorkers   = 32 // relay workers
)

// BenchmarkRelayLagAt1000EventsPerSecond records b.N bookings' creates at 1,000 events/s through the
// ledger (concurrent appenders, open loop: event i is due at i ms) while the relay delivers them to a
// fast local receiver, and reports the rate reached, the lag from the ledger's commit to the
// receiver (p50, p99, overall and per half of the run: a lag that grows from the first half to the
// second is delivery falling behind) and the drain after the last commit. The lead runs it in make
// bench; locally: -benchtime=3000x.
func BenchmarkRelayLagAt1000EventsPerSecond(b *testing.B) {
	e := newEnv(b)
	r := e.startRelay(b, relayOpts{workers: benchWorkers})
	ctx := context.Background()
	var (
		mu      sync.Mutex
		arrived = map[string]time.Time{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		if _, ok := arrived[req.Header.Get("webhook-id")]; !ok {
			arrived[req.Header.Get("webhook-id")] = time.Now()
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(srv.Close)
	if _, _, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: srv.URL}); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, b.N)
	committed := make([]time.Time, b.N)
	errs := make(chan error, benchAppenders)
	due := make(chan int, benchAppenders)
	var wg sync.WaitGroup
	for range benchAppenders {
		wg.Go(func() {
			for i := range due {
				bk := fmt.Sprintf("calendly-bench-%d", i)
				res, err := e.ledger.Record(ctx, ledger.Delivery{
					Receipt: ledger.Receipt{Provider: "calendly", ReceivedAt: time.Now(), DeliveryID: bk, Secret: "0:3f2a9c",
						Body: []byte(`{"delivery":"` + bk + `"}`)},
					Events: []booking.Event{e.scheduled(bk, i%24)},
				})
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				committed[i], ids[i] = time.Now(), "msg_"+res.EventID.String()
			}
		})
	}
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if d := time.Until(start.Add(time.Duration(i) * time.Second / benchRate)); d > 0 {
			time.Sleep(d)
		}
		due <- i
	}
	close(due)
	wg.Wait()
	last := time.Now()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	b.ReportMetric(float64(b.N)/last.Sub(start).Seconds(), "ingest-events/s")
	deadline := last.Add(2 * time.Minute)
	for {
		mu.Lock()
		n := len(arrived)
		mu.Unlock()
		if n >= b.N || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	var lags, first, second []float64
	var lastArrival time.Time
	for i, id := range ids {
		a, ok := arrived[id]
		if !ok {
			b.Fatalf("webhook-id %s not delivered within 2 minutes", id)
		}
		ms := float64(a.Sub(committed[i]).Microseconds()) / 1000
		lags = append(lags, ms)
		if i < b.N/2 {
			first = append(first, ms)
		} else {
			second = append(second, ms)
		}
		if a.After(lastArrival) {
			lastArrival = a
		}
	}
	reportLag(b, lags, "lag-")
	reportLag(b, first, "first-half-lag-")
	reportLag(b, second, "second-half-lag-")
	b.ReportMetric(float64(lastArrival.Sub(last).Milliseconds()), "drain-ms")
}

// reportLag reports the p50 and p99 of lags (ms) as prefix+"p50-ms" and prefix+"p99-ms".
func reportLag(b *testing.B, lags []float64, prefix string) {
	if len(lags) == 0 {
		return
	}
	slices.Sort(lags)
	q := func(p float64) float64 { return lags[min(len(lags)-1, int(p*float64(len(lags))))] }
	b.ReportMetric(q(0.5), prefix+"p50-ms")
	b.ReportMetric(q(0.99), prefix+"p99-ms")
}
