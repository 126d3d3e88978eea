package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi"
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
	ts := newServer(t, func(c *httpapi.Config) { c.LogSummaryInterval = interval })
	ts.storeDown(t)
	began := time.Now()
	for i := range deliveries {
		r := ts.send(t, ts.calendlyDelivery(t, calendly.EventInviteeCreated, fmt.Sprintf("storm-%d", i)))
		require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
		if i < probes {
			ready, err := http.Get(ts.URL + "/readyz")
			require.NoError(t, err)
			ready.Body.Close()
			require.Equal(t, http.StatusServiceUnavailable, ready.StatusCode)
		}
	}
	elapsed := time.Since(began)
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
