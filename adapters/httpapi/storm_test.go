package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers/calendly"
)

// linesOf returns the server's log lines with message msg, decoded.
func (ts *testServer) linesOf(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(ts.Logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// occurrences sums what summarised lines stand for: 1 for a line written at once, "repeated" for a
// summary.
func occurrences(lines []map[string]any) int {
	n := 0
	for _, l := range lines {
		if r, ok := l["repeated"].(float64); ok {
			n += int(r)
		} else {
			n++
		}
	}
	return n
}

// During an outage every delivery is a 503 and every /readyz probe fails: the log gets about one
// line per interval of each, each saying how many occurrences it stands for, while the metrics count
// every one.
func TestOutageLogsAreSummarisedAndMetricsStayExact(t *testing.T) {
	parallel(t)
	const (
		interval   = 300 * time.Millisecond
		deliveries = 60
		probes     = 20
	)
	ts := newServerOn(t, ownPool(t), func(c *httpapi.Config) { c.LogSummaryInterval = interval })
	ds := make([]sample.Delivery, deliveries)
	for i := range ds {
		ds[i] = ts.calendlyDelivery(t, calendly.EventInviteeCreated, fmt.Sprintf("storm-%d", i))
	}
	ts.storeDown(t)
	// A storm: the deliveries come from a few senders at once, so that an interval holds many of them
	// even where one 503 takes long (on EventStoreDB each tries a fresh client first), while the
	// probes come one after another.
	const senders = 4
	replies := make([]reply, deliveries)
	errs := make([]error, deliveries)
	var wg sync.WaitGroup
	began := time.Now()
	for w := range senders {
		wg.Go(func() {
			for i := w; i < deliveries; i += senders {
				replies[i], errs[i] = postTo(context.Background(), http.DefaultClient, ts.URL, ds[i].Provider, ds[i].Header, ds[i].Body)
			}
		})
	}
	for range probes {
		ready, err := http.Get(ts.URL + "/readyz")
		require.NoError(t, err)
		ready.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, ready.StatusCode)
	}
	wg.Wait()
	elapsed := time.Since(began)
	for i := range deliveries {
		require.NoError(t, errs[i])
		require.Equal(t, http.StatusServiceUnavailable, replies[i].Status, "%s", replies[i].Body)
	}
	time.Sleep(2 * interval) // the last summaries are written at the end of their interval

	windows := int(elapsed/interval) + 2
	unavailable := ts.linesOf(t, "delivery not recorded")
	assert.LessOrEqual(t, len(unavailable), windows, "about one line per interval, not one per 503")
	assert.Equal(t, deliveries, occurrences(unavailable), "the lines account for every 503")
	assert.Equal(t, "ERROR", unavailable[0]["level"])
	notReady := ts.linesOf(t, "not ready")
	assert.LessOrEqual(t, len(notReady), windows)
	assert.Equal(t, probes, occurrences(notReady))
	assert.Equal(t, float64(deliveries), ts.metric(t, httpapi.MetricDeliveries, map[string]string{"provider": "calendly", "outcome": "unavailable"}),
		"the metric counts every one")
}
