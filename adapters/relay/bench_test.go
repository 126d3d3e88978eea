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
)

// BenchmarkRelayLagAt1000EventsPerSecond records b.N bookings' creates at 1,000 events/s through the
// ledger while the relay delivers them to a fast local receiver, and reports the lag from the
// ledger's commit to the receiver (p50, p99) and whether delivery kept up (all delivered within a
// second of the last commit). The lead runs it in make bench; locally: -benchtime=500x.
func BenchmarkRelayLagAt1000EventsPerSecond(b *testing.B) {
	e := newEnv(b)
	r := e.startRelay(b, relayOpts{workers: 16})
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
	committed := make(map[string]time.Time, b.N)
	b.ResetTimer()
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for i := range b.N {
		<-tick.C
		bk := fmt.Sprintf("calendly-bench-%d", i)
		res := e.record(b, bk, e.scheduled(bk, i%24))
		committed["msg_"+res.EventID.String()] = time.Now()
	}
	last := time.Now()
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
	lags := make([]float64, 0, len(committed))
	var lastArrival time.Time
	for id, c := range committed {
		a, ok := arrived[id]
		if !ok {
			b.Fatalf("webhook-id %s not delivered within 2 minutes", id)
		}
		lags = append(lags, float64(a.Sub(c).Microseconds())/1000)
		if a.After(lastArrival) {
			lastArrival = a
		}
	}
	slices.Sort(lags)
	q := func(p float64) float64 { return lags[min(len(lags)-1, int(p*float64(len(lags))))] }
	b.ReportMetric(q(0.5), "lag-p50-ms")
	b.ReportMetric(q(0.99), "lag-p99-ms")
	b.ReportMetric(float64(lastArrival.Sub(last).Milliseconds()), "drain-ms")
}
