package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"bookingledger/adapters/httpapi/anchor"
	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers/calendly"
)

// BenchmarkIngestVsHandwritten sends the same kind of signed Calendly invitee.created bodies (each a
// new booking at its own slot) over loopback HTTP with the same load generator to bookingledger and to
// the hand-written handler (package anchor), on one durable cluster and one database, at concurrency 1, 8 and
// 32, the two run back to back at each concurrency (with -count N each runs N times in a row), so
// that drift hits both about alike. scripts/bench.sh reports the ratio of their means. This is the
// ingest alone, in process: bookingledger's handler without serve's projections, served from the
// benchmark's own process. The whole `serve` as shipped, as a process of its own, against the handler
// as another: BenchmarkServeVsHandwritten (cmd/bookingledger).
//
//	go test -run '^$' -bench BenchmarkIngestVsHandwritten -benchtime 3000x -count 3 ./adapters/httpapi/
func BenchmarkIngestVsHandwritten(b *testing.B) {
	pool, srv := benchServer(b)
	if _, err := pool.Exec(context.Background(), anchor.Schema); err != nil {
		b.Fatal(err)
	}
	servers := []struct {
		name string
		url  string
	}{
		{"bookingledger", httptest.NewServer(srv.Handler()).URL},
		{"handwritten", httptest.NewServer(http.StripPrefix("/webhooks/calendly", &anchor.Handler{Pool: pool, Key: []byte(calendlyKey)})).URL},
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512}}
	var seq atomic.Int64
	base := time.Now().Add(24 * time.Hour).Truncate(time.Hour)
	for _, conc := range []int{1, 8, 32} {
		for _, s := range servers {
			b.Run(fmt.Sprintf("c=%d/%s", conc, s.name), func(b *testing.B) {
				ds := make([]sample.Delivery, b.N)
				now := time.Now()
				for i := range ds {
					n := seq.Add(1)
					d, err := sample.Build("calendly", calendly.EventInviteeCreated, calendlyKey,
						sample.Params{Booking: fmt.Sprintf("anchor-%d", n), Start: base.Add(time.Duration(n) * time.Hour)}, now)
					if err != nil {
						b.Fatal(err)
					}
					ds[i] = d
				}
				closedLoop(b, ds, conc, func(d sample.Delivery) error {
					r, err := postTo(context.Background(), client, s.url, d.Provider, d.Header, d.Body)
					if err != nil {
						return err
					}
					if r.Status != http.StatusOK {
						return fmt.Errorf("%s: status %d: %s", s.name, r.Status, r.Body)
					}
					return nil
				})
			})
		}
	}
}
