package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

// envBurstCopies sets how many concurrent copies of each of the 50 deliveries TestBurstAtTheRecordBound
// sends at once. The default, 20 (1,000 requests at once), keeps `go test -race` on 2 cores well
// under a minute; the documented full figure, issue #36's, is 100 (5,000 requests at once), which
// `make bench` (scripts/bench.sh) runs.
const envBurstCopies = "BOOKINGLEDGER_TEST_BURST_COPIES"

// TestBurstAtTheRecordBound (issue #36): a provider's retry storm at the real binary — 50 deliveries,
// each sent as BOOKINGLEDGER_TEST_BURST_COPIES concurrent copies (default 20; 100 — 5,000 requests
// at once — in `make bench`) — against serve with a small recording bound (8 at once, a 100 ms queue wait). Asserted on
// counts, not on the client's clock:
//   - every answer is 2xx, or 503 with Retry-After and the error code "overloaded"; a request the
//     server closed unanswered (its 5 s header timeout, when the storm's client is too slow to write
//     the request on a loaded machine) is counted apart: nothing was acknowledged, it is retried
//     below like the 503s. A client timeout (2 minutes: a server that hung) fails;
//   - the bound was hit (some 503s), and the server's own admission histogram counts exactly the shed
//     requests, every one in a bucket at most 1 s in `make bench`'s run (issue #36's figure: the
//     100 ms wait plus a generous margin, on a machine running nothing else) and at most 5 s, half
//     the record timeout, under make test, whose other packages and this test's own -race client
//     starve the serve process of CPU (there one shed wait of 974 passed 1 s, and on a slower
//     machine one of 981 passed 2.5 s, 909 within 1 s): either way no shed request waited out the
//     10 s record timeout in a queue. How soon a request is shed is a latency figure, measured
//     where the machine is quiet; under make test the assertion is that it is shed at all;
//   - every delivery acknowledged with 2xx is in the ledger after the storm, all its 2xx answers name
//     one event, and it has exactly one accepted receipt: 0 acknowledged lost, no duplicates;
//   - every delivery sent once more after the storm is acknowledged (a duplicate where one of its
//     copies was), and then too the ledger holds each exactly once.
//
// It runs beside the other tests: the storm's serve is a process of its own (built without -race), its
// 100 ms queue wait ten times below the bound asserted, and make test's other packages load the
// machine alike. It logs how many shed waits stayed within 250 and 500 ms, the margin left.
func TestBurstAtTheRecordBound(t *testing.T) {
	t.Parallel() // its own database, ports and serve process
	const deliveries = 50
	copies := 20
	shedBound := "5" // seconds, an admission histogram bucket; see above
	if v := os.Getenv(envBurstCopies); v != "" {
		shedBound = "1"
		n, err := strconv.Atoi(v)
		require.NoError(t, err, envBurstCopies)
		require.Positive(t, n, envBurstCopies)
		copies = n
	}
	dbURL := servetest.NewDatabaseURL(t)
	bin := buildBinary(t)
	adminAddr := freeAddr(t)
	_, base := startServeProcess(t, bin, dbURL, "BOOKINGLEDGER_ADMIN_ADDR="+adminAddr,
		"BOOKINGLEDGER_RECORD_MAX_INFLIGHT=8", "BOOKINGLEDGER_RECORD_QUEUE_WAIT=100ms")
	admin := "http://" + adminAddr

	ds := make([]sample.Delivery, deliveries)
	for i := range ds {
		d, err := sample.Build("calendly", "invitee.created", crashKey,
			sample.Params{Booking: fmt.Sprintf("burst-%d", i), Host: fmt.Sprintf("burst-host-%d", i%5),
				Start: time.Now().Add(48 * time.Hour).Truncate(time.Hour).Add(time.Duration(i) * time.Hour)}, time.Now())
		require.NoError(t, err)
		ds[i] = d
	}
	type answer struct {
		status     int
		retryAfter string
		code       string
		resp       httpapi.Response
		err        error
	}
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: -1}}
	post := func(d sample.Delivery) answer {
		req, err := http.NewRequest(http.MethodPost, base+"/webhooks/calendly", bytes.NewReader(d.Body))
		if err != nil {
			return answer{err: err}
		}
		req.Header = d.Header.Clone()
		resp, err := client.Do(req)
		if err != nil {
			return answer{err: err}
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		a := answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), err: err}
		if resp.StatusCode/100 == 2 {
			a.err = json.Unmarshal(body, &a.resp)
		} else {
			var e httpapi.ErrorResponse
			if json.Unmarshal(body, &e) == nil {
				a.code = e.Code
			}
		}
		return a
	}

	answers := make([][]answer, deliveries)
	for i := range answers {
		answers[i] = make([]answer, copies)
	}
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range deliveries {
		for c := range copies {
			wg.Go(func() {
				<-gate
				answers[i][c] = post(ds[i])
			})
		}
	}
	close(gate)
	wg.Wait()

	var acked, shed, unanswered int
	kinds := map[string]int{} // the unanswered ones' errors
	for i := range deliveries {
		var eventID string
		for c := range copies {
			a := answers[i][c]
			if a.err != nil {
				var ne net.Error
				require.False(t, errors.As(a.err, &ne) && ne.Timeout(), "delivery %d copy %d: no answer within 2 minutes: %v", i, c, a.err)
				require.Zero(t, a.status, "delivery %d copy %d: unreadable answer: %v", i, c, a.err)
				unanswered++
				kinds[strings.TrimPrefix(a.err.Error(), `Post "`+base+`/webhooks/calendly": `)]++
				continue
			}
			switch {
			case a.status/100 == 2:
				acked++
				require.NotEmpty(t, a.resp.EventID, "delivery %d copy %d: a 2xx names its event", i, c)
				if eventID == "" {
					eventID = a.resp.EventID
				}
				assert.Equal(t, eventID, a.resp.EventID, "delivery %d: every 2xx names the one recorded event", i)
			case a.status == http.StatusServiceUnavailable:
				shed++
				assert.NotEmpty(t, a.retryAfter, "delivery %d copy %d: 503 without Retry-After", i, c)
				assert.Equal(t, "overloaded", a.code, "delivery %d copy %d", i, c)
			default:
				t.Errorf("delivery %d copy %d: status %d, want 2xx or 503", i, c, a.status)
			}
		}
	}
	t.Logf("%d requests: %d acknowledged, %d answered 503 overloaded, %d closed unanswered %v", deliveries*copies, acked, shed, unanswered, kinds)
	require.Positive(t, shed, "the burst never hit the bound of 8: the test did not test it")

	// The server's own account of the waits: every shed request counted, none past 1 s.
	metrics := scrape(t, admin+"/metrics")
	shedCount := sampleValue(t, metrics, httpapi.MetricAdmissionWaitSeconds+`_count{result="shed"}`)
	assert.Equal(t, float64(shed), shedCount, "the admission histogram counts every 503 overloaded")
	shedWithin := func(le string) float64 {
		return sampleValue(t, metrics, httpapi.MetricAdmissionWaitSeconds+`_bucket{result="shed",le="`+le+`"}`)
	}
	t.Logf("shed waits: %v within 250 ms, %v within 500 ms, %v within 1 s, %v within 2.5 s, %v within 5 s, of %v",
		shedWithin("0.25"), shedWithin("0.5"), shedWithin("1"), shedWithin("2.5"), shedWithin("5"), shedCount)
	assert.Equal(t, shedCount, shedWithin(shedBound),
		"a shed request waited more than %s s for a slot (the queue wait is 100 ms)", shedBound)

	// Nothing acknowledged is lost, nothing is recorded twice.
	pool := pgtest.Open(t, dbURL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	checkOnce := func(i int, eventID, booking string) {
		t.Helper()
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE event_id = $1::uuid`, eventID).Scan(&n))
		assert.Equal(t, 1, n, "delivery %d: acknowledged event %s is not in the ledger once", i, eventID)
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM receipts WHERE outcome = 'accepted' AND $1 = ANY (bookings)`, booking).Scan(&n))
		assert.Equal(t, 1, n, "delivery %d: booking %s has %d accepted receipts, want 1", i, booking, n)
	}
	for i := range deliveries {
		for _, a := range answers[i] {
			if a.status/100 == 2 {
				checkOnce(i, a.resp.EventID, a.resp.Booking)
				break
			}
		}
	}

	// The provider's retries once the storm is over: each delivery acknowledged, once.
	for i, d := range ds {
		a := post(d)
		require.NoError(t, a.err)
		require.Equal(t, http.StatusOK, a.status, "delivery %d retried after the storm", i)
		checkOnce(i, a.resp.EventID, a.resp.Booking)
		for _, earlier := range answers[i] {
			if earlier.status/100 == 2 {
				assert.Equal(t, "duplicate", string(a.resp.Status), "delivery %d was acknowledged in the storm", i)
				assert.Equal(t, earlier.resp.EventID, a.resp.EventID, "delivery %d", i)
				break
			}
		}
	}
	var events int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM receipts WHERE outcome = 'accepted'`).Scan(&events))
	assert.Equal(t, deliveries, events, "accepted receipts: one per delivery")
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// scrape returns the text of a /metrics page.
func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	return string(body)
}

// sampleValue is the value of the sample whose name and labels are exactly series; 0 when absent.
func sampleValue(t *testing.T, metrics, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			require.NoError(t, err, line)
			return f
		}
	}
	return 0
}
