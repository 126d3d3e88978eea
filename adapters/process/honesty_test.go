package process_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/caldav"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/adapters/process"
)

// openItems returns the reasons of the open step items of booking b.
func (w *workerWorld) openItems(t *testing.T, b string) []string {
	t.Helper()
	rows, err := w.pool.Query(context.Background(), `SELECT reason FROM reconciliation_items WHERE kind = 'step' AND booking = $1 AND closed_at IS NULL`, b)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var r string
		require.NoError(t, rows.Scan(&r))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// A CalDAV server without the host's collection refuses the PUT (Radicale: 409, as RFC 4918 says;
// Xandikos: 404): nothing was written, so the outcome is known and retrying cannot help. The step
// fails at once, and the reconciliation item names the collection's exact URL and the way out.
func TestWorkerReportsAMissingCollectionOnceWithItsURL(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusConflict, http.StatusNotFound} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			var puts int
			w := newWorkerWorld(t, func(r *http.Request) int {
				switch r.Method {
				case http.MethodPut:
					puts++
					return status
				case "PROPFIND":
					return http.StatusNotFound
				}
				return 0
			}, nil)
			start := time.Date(2031, 4, 1, 9, 0, 0, 0, time.UTC)
			slot := [2]time.Time{start, start.Add(time.Hour)}
			id := w.step(t, "acuity-nocoll", slot, slot[0], slot[1])
			state, _, err := w.work(t, id)
			require.NoError(t, err, "a failed step's job does not retry")
			assert.Equal(t, "failed", state)
			assert.Equal(t, 1, puts, "one PUT, no retry loop")
			items := w.openItems(t, "acuity-nocoll")
			require.Len(t, items, 1)
			coll := w.sink.URL() + "/dav/" + caldav.Collection("host-1") + "/bookings/"
			assert.Contains(t, items[0], "calendar collection missing at "+coll)
			assert.Contains(t, items[0], "bookingledger steps setup")
		})
	}
}

// A refused connection proves the request never left: the step is pending (retried), not requested
// (unknown), and nothing goes to an operator until the attempts run out; then it fails with an item.
func TestWorkerTakesARefusedConnectionForNothingDone(t *testing.T) {
	t.Parallel()
	w := newWorkerWorld(t, nil, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	target, err := caldav.New(caldav.Config{URLTemplate: "http://" + addr + "/dav/{resource}/", AllowPrivate: true})
	require.NoError(t, err)
	w.worker, err = process.NewWorker(process.WorkerConfig{Pool: w.pool, Steps: stepstore.NewStore(w.pool, nil), Slots: readmodel.NewStepReader(w.pool), Contacts: postgres.NewContacts(w.pool), Calendar: target, CallTimeout: 2 * time.Second})
	require.NoError(t, err)
	start := time.Date(2031, 4, 2, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	id := w.step(t, "acuity-refused", slot, slot[0], slot[1])
	state, _, err := w.work(t, id)
	require.Error(t, err, "River retries the job")
	assert.Equal(t, "pending", state, "a refused connection did nothing")
	assert.Empty(t, w.openItems(t, "acuity-refused"))

	state, note, err := w.workAttempt(t, id, process.DefaultMaxAttempts)
	require.NoError(t, err)
	assert.Equal(t, "failed", state)
	assert.Contains(t, note, "gave up after")
	items := w.openItems(t, "acuity-refused")
	require.Len(t, items, 1, "a failure is never silent")
	assert.Contains(t, items[0], "refused")
}

// A step that succeeds after failed attempts does not keep their error as its last error.
func TestWorkerDoneClearsTheLastError(t *testing.T) {
	t.Parallel()
	var puts int
	w := newWorkerWorld(t, func(r *http.Request) int {
		if r.Method == http.MethodPut {
			if puts++; puts == 1 {
				return http.StatusServiceUnavailable
			}
		}
		return 0
	}, nil)
	start := time.Date(2031, 4, 3, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	id := w.step(t, "acuity-cleared", slot, slot[0], slot[1])
	state, _, err := w.work(t, id)
	require.Error(t, err)
	assert.Equal(t, "pending", state)
	var lastErr string
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT last_error FROM process_steps WHERE id = $1`, id).Scan(&lastErr))
	assert.Contains(t, lastErr, "503")
	state, _, err = w.workAttempt(t, id, 2)
	require.NoError(t, err)
	assert.Equal(t, "done", state)
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT last_error FROM process_steps WHERE id = $1`, id).Scan(&lastErr))
	assert.Empty(t, lastErr)
}
