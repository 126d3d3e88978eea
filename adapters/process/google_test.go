package process_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/gcal"
	"bookingledger/adapters/gcal/gcalfake"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/adapters/process"
)

// googleWorld is the worker world with the Google Calendar target (against the fake) instead of CalDAV.
func googleWorld(t *testing.T, timeout time.Duration) (*workerWorld, *gcalfake.Server) {
	t.Helper()
	w := newWorkerWorld(t, nil, nil)
	s := gcalfake.Start()
	t.Cleanup(s.Close)
	tg, err := gcal.New(gcal.Config{Endpoint: s.Endpoint(), AllowPrivate: true, Timeout: timeout,
		Calendars: func(r string) (gcal.Calendar, bool) { return gcal.Calendar{ID: "primary"}, r == "host-1" }})
	require.NoError(t, err)
	w.worker, err = process.NewWorker(process.WorkerConfig{Pool: w.pool, Steps: stepstore.NewStore(w.pool, nil), Slots: readmodel.NewStepReader(w.pool), Contacts: postgres.NewContacts(w.pool), Calendar: tg, CallTimeout: timeout})
	require.NoError(t, err)
	return w, s
}

// A create on Google runs once whatever runs its job: a redelivered job (5 more runs) and 20
// concurrent copies find the step done or claimed; one event is inserted.
func TestWorkerGoogleCreatesOnceUnderRedeliveryAndConcurrentCopies(t *testing.T) {
	t.Parallel()
	w, s := googleWorld(t, 5*time.Second)
	start := time.Date(2031, 6, 1, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	id := w.step(t, "acuity-g1", slot, slot[0], slot[1])
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { _, _, _ = w.work(t, id) })
	}
	wg.Wait()
	for range 5 {
		state, _, _ := w.work(t, id)
		require.Equal(t, "done", state)
	}
	assert.Equal(t, 1, s.Inserts())
	assert.Len(t, s.Events("primary"), 1)
}

// An insert that reached Google and whose answer was lost (the call timed out) is unknown; the next
// attempt looks the id up, finds the event and is done, without a second insert.
func TestWorkerGoogleSettlesALostInsertByLookup(t *testing.T) {
	t.Parallel()
	w, s := googleWorld(t, 300*time.Millisecond)
	release := make(chan struct{})
	s.SetAfterWrite(func(*http.Request) { <-release })
	start := time.Date(2031, 6, 2, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	id := w.step(t, "acuity-g2", slot, slot[0], slot[1])
	state, _, err := w.work(t, id)
	close(release)
	require.Error(t, err)
	assert.Equal(t, "requested", state, "unknown, not pending: the insert may have landed")
	s.SetAfterWrite(nil)
	state, _, err = w.workAttempt(t, id, 2)
	require.NoError(t, err)
	assert.Equal(t, "done", state)
	assert.Equal(t, 1, s.Calls(http.MethodPost), "no second insert")
	assert.Len(t, s.Events("primary"), 1)
	var href, etag string
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT target_href, target_etag FROM process_steps WHERE id = $1`, id).Scan(&href, &etag))
	assert.Contains(t, href, s.Endpoint()+"calendars/primary/events/")
	assert.NotEmpty(t, etag)
}
