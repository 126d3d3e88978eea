package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
)

const (
	// envLagDeliveries sets the deliveries of one BenchmarkProjectionLagAtRate round.
	envLagDeliveries     = "BOOKINGLEDGER_BENCH_LAG_DELIVERIES"
	defaultLagDeliveries = 3000
	// lagPoolMaxConns is serve's pool size when the URL does not set one (cmd/bookingledger), so the
	// ingress, the runner and the read API compete for connections as they do in production.
	lagPoolMaxConns = 20
	// lagPollPause is the poller's rest between calendar queries. Polling back to back would keep one
	// of the two cores busy with the measurement itself; a few hundred polls a second keep its cost
	// well under the ingest's while the resolution stays a small fraction of the 100 ms target.
	lagPollPause = 2 * time.Millisecond
	// lagSpacing separates the bookings' start times: each delivery is a new booking on its own host
	// at its own hour, so a calendar window names exactly the bookings the poller still waits for.
	lagSpacing = time.Hour
	// lagSettle bounds the wait, after the last acknowledgement, for the last booking to show.
	lagSettle = 20 * time.Second
	// lagWarmup is the untimed round that brings the server to its steady state.
	lagWarmup = 1000
)

// BenchmarkProjectionLagAtRate measures projection lag as the issue defines it: from a webhook's
// acknowledgement (the client has the 2xx) to the booking being visible through GET /api/calendar,
// while deliveries arrive open loop at 1,000 requests/s. The server is wired as serve wires it: the
// ingress with the read API mounted, and the calendar projection's runner following the event log in
// the background, over a fresh database.
//
// Each round sends BOOKINGLEDGER_BENCH_LAG_DELIVERIES (default 3,000) signed Calendly invitee.created
// deliveries, each a new booking on its own host and hour, paced as BenchmarkIngest paces them (ack
// latency counted from the scheduled send time). One poller meanwhile asks the calendar for the window
// from the earliest booking not yet seen to the latest one sent: the projection applies in log order,
// so that window holds the few bookings that are in flight, not the thousands already seen, and each
// poll is one index range scan of a handful of rows.
//
// Poll resolution: a booking is stamped visible when the first poll that shows it has answered. The
// poll before it may have taken its snapshot just before the booking was applied, so the reported lag
// overstates the true one by at most lagPollPause plus two poll round trips (poll-p99-ms reports the
// round trip; a few milliseconds on loopback). A booking seen before its own ack arrived counts as
// lag 0 (seen-before-ack counts them).
//
//	go test -run '^$' -bench '^BenchmarkProjectionLagAtRate$' -benchtime 1x ./adapters/httpapi/
//
// With -benchtime Nx it runs N rounds of new bookings and reports percentiles over all of them.
func BenchmarkProjectionLagAtRate(b *testing.B) {
	n := defaultLagDeliveries
	if v := os.Getenv(envLagDeliveries); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("%s=%q: want a positive number of deliveries", envLagDeliveries, v)
		}
	}

	lr := newLagRun(b)
	// A second of deliveries at the same rate first, not counted: the target is the lag of a server
	// that is already taking 1,000 req/s. From cold, the first burst opens its database and HTTP
	// connections and prepares its statements while it is being timed (about 100 ms in which ack
	// and lag both run to 70–115 ms).
	if _, err := lr.round(b, "lag-warmup", lagWarmup); err != nil {
		b.Fatal(err)
	}

	var all lagRound
	b.ResetTimer()
	for r := range b.N {
		got, err := lr.round(b, fmt.Sprintf("lag-%d", r), n)
		if err != nil {
			b.Fatal(err)
		}
		all.lags = append(all.lags, got.lags...)
		all.acks = append(all.acks, got.acks...)
		all.polls = append(all.polls, got.polls...)
		all.sending += got.sending
		all.early += got.early
	}
	b.StopTimer()

	b.ReportMetric(lagPercentile(all.lags, 0.50), "lag-p50-ms")
	b.ReportMetric(lagPercentile(all.lags, 0.99), "lag-p99-ms")
	b.ReportMetric(lagPercentile(all.lags, 1), "lag-max-ms")
	b.ReportMetric(float64(len(all.acks))/all.sending.Seconds(), "deliveries/s")
	b.ReportMetric(lagPercentile(all.acks, 0.99), "ack-p99-ms")
	b.ReportMetric(lagPercentile(all.polls, 0.99), "poll-p99-ms")
	b.ReportMetric(float64(all.early), "seen-before-ack")
	b.ReportMetric(0, "ns/op") // one round's wall time is set by the pacer; the figures above are the result
}

// newLagRun starts the lag benchmarks' server, wired as serve wires it (the ingress with the read API
// mounted, the calendar projection's runner following the event log in the background, over a fresh
// database), and returns its clients.
func newLagRun(b *testing.B) *lagRun {
	b.Helper()
	dbURL := pgtest.NewDatabaseURL(b)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = lagPoolMaxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	store := postgres.NewStore(pool)

	rm := readmodel.New(pool, store, eventcodec.JSON{}, readmodel.Options{})
	runner := projections.NewRunner(store, rm, checkpoint.NewLocker(pool),
		projections.RunnerOptions{Logger: slog.New(slog.DiscardHandler), Subscriber: store, Bulk: rm})
	runCtx, stopRunner := context.WithCancel(context.Background())
	runnerDone := make(chan struct{})
	go func() {
		defer close(runnerDone)
		_ = runner.Run(runCtx)
	}()
	// Registered after pool.Close, so it runs before it: the runner's lock lives on the pool.
	b.Cleanup(func() { stopRunner(); <-runnerDone })
	for deadline := time.Now().Add(time.Minute); !runner.Status().Active; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the projection runner did not become active within a minute")
		}
	}

	srv, err := httpapi.New(httpapi.Config{
		Ledger:    ledger.NewService(store, eventcodec.JSON{}).WithUnreadNewStreams(1 << 16), // as serve
		Providers: []providers.Provider{calendly.New(providers.NewSecrets(calendlyKey), 0)},
		Ready:     httpapi.CheckFunc(func(context.Context) error { return nil }),
		Logger:    slog.New(slog.DiscardHandler),
		AdminRoutes: func(mux httpapi.Mux) {
			readapi.Register(mux, readapi.Deps{Reader: rm})
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(hs.Close)
	admin := httptest.NewServer(srv.AdminHandler())
	b.Cleanup(admin.Close)
	ingest := &http.Client{Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512}}
	// The poller has its own connection, so it never waits behind the ingest's.
	poll := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	b.Cleanup(ingest.CloseIdleConnections)
	b.Cleanup(poll.CloseIdleConnections)

	return &lagRun{ingest: ingest, poll: poll, baseURL: hs.URL, adminURL: admin.URL}
}

// lagRun is the clients of one benchmark's server.
type lagRun struct {
	ingest, poll *http.Client
	baseURL      string // webhooks
	adminURL     string // the read API
	// base is the start of the next round's first booking; rounds never share a calendar hour.
	base time.Time
}

// lagRound is what one round measured.
type lagRound struct {
	lags    []time.Duration // visible − ack, per booking (0 when seen before the ack)
	acks    []time.Duration // ack − scheduled send time, per delivery
	polls   []time.Duration // round trip of every calendar query
	sending time.Duration   // first scheduled send to last ack
	early   int             // bookings seen before their ack arrived
}

// round sends n new bookings at 1,000/s while polling the calendar for them, and returns their lags.
func (lr *lagRun) round(b *testing.B, prefix string, n int) (lagRound, error) {
	b.Helper()
	const interval = time.Millisecond
	if lr.base.IsZero() {
		lr.base = sample.DefaultStart()
	}
	starts := make([]time.Time, n)
	index := make(map[string]int, n) // calendar booking ID → delivery
	ds := make([]sample.Delivery, n)
	now := time.Now()
	for i := range ds {
		key := fmt.Sprintf("%s-%d", prefix, i)
		starts[i] = lr.base.Add(time.Duration(i) * lagSpacing)
		d, err := sample.Build("calendly", calendly.EventInviteeCreated, calendlyKey,
			sample.Params{Booking: key, Host: "lag-host-" + key, Start: starts[i]}, now)
		if err != nil {
			return lagRound{}, err
		}
		ds[i] = d
		index["calendly-"+key] = i
	}
	lr.base = lr.base.Add(time.Duration(n+1) * lagSpacing)

	var (
		acked    = make([]time.Time, n)
		ackLat   = make([]time.Duration, n)
		seen     = make([]time.Time, n)
		polls    []time.Duration
		sent     atomic.Int64 // deliveries whose request has been started
		ackedAll = make(chan struct{})
		failed   atomic.Value
		wg       sync.WaitGroup
		pollErr  = make(chan error, 1)
	)
	pollCtx, stopPolling := context.WithCancel(context.Background())
	defer stopPolling()
	go func() {
		pollErr <- lr.pollUntilSeen(pollCtx, starts, index, seen, &polls, &sent, ackedAll)
	}()

	start := time.Now()
	for i := range ds {
		due := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		sent.Store(int64(i + 1))
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := postTo(context.Background(), lr.ingest, lr.baseURL, "calendly", ds[i].Header, ds[i].Body)
			if err == nil && r.Status != http.StatusOK {
				err = fmt.Errorf("delivery %d: status %d: %s", i, r.Status, r.Body)
			}
			if err != nil {
				failed.Store(err)
				return
			}
			acked[i] = time.Now()
			ackLat[i] = acked[i].Sub(due) // from the scheduled time: pacer lag counts as latency
		}()
	}
	wg.Wait()
	sending := time.Since(start)
	close(ackedAll)
	if err, _ := failed.Load().(error); err != nil {
		stopPolling() // a booking that was never acked would be waited for in vain
		<-pollErr
		return lagRound{}, err
	}
	if err := <-pollErr; err != nil {
		return lagRound{}, err
	}

	out := lagRound{acks: ackLat, polls: polls, sending: sending, lags: make([]time.Duration, n)}
	for i := range seen {
		if lag := seen[i].Sub(acked[i]); lag > 0 {
			out.lags[i] = lag
		} else {
			out.early++
		}
	}
	return out, nil
}

// pollUntilSeen queries the calendar until every booking has been seen, stamping each with the time
// the first answer showing it arrived. It gives up lagSettle after the last ack.
func (lr *lagRun) pollUntilSeen(ctx context.Context, starts []time.Time, index map[string]int, seen []time.Time,
	polls *[]time.Duration, sent *atomic.Int64, ackedAll <-chan struct{}) error {
	var giveUp <-chan time.Time
	lo := 0 // earliest booking not seen yet
	for lo < len(starts) {
		select {
		case <-ackedAll:
			ackedAll, giveUp = nil, time.After(lagSettle)
		case <-ctx.Done():
			return ctx.Err()
		case <-giveUp:
			return fmt.Errorf("%d of %d bookings not visible in /api/calendar %s after the last ack",
				len(starts)-lo, len(starts), lagSettle)
		default:
		}
		hi := int(sent.Load()) - 1
		if hi < lo {
			time.Sleep(lagPollPause)
			continue
		}
		from := starts[lo]
		to := starts[hi].Add(lagSpacing)
		if to.Sub(from) > calendar.MaxCalendarWindow {
			to = from.Add(calendar.MaxCalendarWindow)
		}
		t0 := time.Now()
		entries, err := lr.calendar(ctx, from, to)
		t1 := time.Now()
		if err != nil {
			return err
		}
		*polls = append(*polls, t1.Sub(t0))
		for _, e := range entries {
			i, ok := index[e.Booking]
			if !ok {
				return fmt.Errorf("calendar shows booking %q, which this round did not send", e.Booking)
			}
			if seen[i].IsZero() {
				seen[i] = t1
			}
		}
		for lo < len(starts) && !seen[lo].IsZero() {
			lo++
		}
		time.Sleep(lagPollPause)
	}
	return nil
}

func (lr *lagRun) calendar(ctx context.Context, from, to time.Time) ([]readapi.CalendarEntryDTO, error) {
	q := url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}, "limit": {strconv.Itoa(calendar.MaxCalendarPage)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, lr.adminURL+"/api/calendar?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := lr.poll.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/calendar: status %d", resp.StatusCode)
	}
	var dto readapi.CalendarDTO
	if err := json.NewDecoder(resp.Body).Decode(&dto); err != nil {
		return nil, fmt.Errorf("GET /api/calendar: %w", err)
	}
	if dto.HasMore {
		return nil, errors.New("GET /api/calendar: answer truncated; narrow the poll window")
	}
	return dto.Bookings, nil
}

// lagPercentile is the p-th percentile of ds in milliseconds (nearest rank; p=1 is the maximum).
func lagPercentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return float64(sorted[int(p*float64(len(sorted)-1))].Microseconds()) / 1000
}
