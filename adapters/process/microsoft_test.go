package process_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/msgraph"
	"bookingledger/adapters/msgraph/msgraphfake"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/adapters/process"
)

// microsoftWorld is the worker world with the Microsoft 365 target (against the Graph fake).
func microsoftWorld(t *testing.T, timeout time.Duration) (*workerWorld, *msgraphfake.Server) {
	t.Helper()
	w := newWorkerWorld(t, nil, nil)
	s := msgraphfake.Start()
	t.Cleanup(s.Close)
	tg, err := msgraph.New(msgraph.Config{Endpoint: s.Endpoint(), AllowPrivate: true, Timeout: timeout,
		Mailboxes: func(r string) (msgraph.Mailbox, bool) {
			return msgraph.Mailbox{User: "host@clinic.example"}, r == "host-1"
		}})
	require.NoError(t, err)
	w.worker, err = process.NewWorker(process.WorkerConfig{Pool: w.pool, Steps: stepstore.NewStore(w.pool, nil), Slots: readmodel.NewStepReader(w.pool), Contacts: postgres.NewContacts(w.pool), Calendar: tg, CallTimeout: timeout})
	require.NoError(t, err)
	return w, s
}

// On Microsoft 365, 20 concurrent copies of a create's job and 5 redeliveries make one POST and one
// event; a POST whose answer was lost is unknown, and the next attempt's lookup finds the event
// instead of posting again; the delete is done, and a second delete finds nothing and is done too.
func TestWorkerMicrosoftCreatesOnceAndSettlesALostCreateByLookup(t *testing.T) {
	t.Parallel()
	w, s := microsoftWorld(t, 300*time.Millisecond)
	start := time.Date(2031, 6, 3, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	id := w.step(t, "acuity-m1", slot, slot[0], slot[1])
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { _, _, _ = w.work(t, id) })
	}
	wg.Wait()
	for range 5 {
		state, _, _ := w.work(t, id)
		require.Equal(t, "done", state)
	}
	assert.Equal(t, 1, s.Calls(http.MethodPost))
	assert.Len(t, s.Events(), 1)

	release := make(chan struct{})
	s.SetAfterWrite(func(*http.Request) { <-release })
	slot2 := [2]time.Time{start.Add(24 * time.Hour), start.Add(25 * time.Hour)}
	id2 := w.step(t, "acuity-m2", slot2, slot2[0], slot2[1])
	state, _, err := w.work(t, id2)
	close(release)
	require.Error(t, err)
	assert.Equal(t, "requested", state, "a POST that reached Graph is unknown")
	s.SetAfterWrite(nil)
	state, _, err = w.workAttempt(t, id2, 2)
	require.NoError(t, err)
	assert.Equal(t, "done", state)
	assert.Equal(t, 2, s.Calls(http.MethodPost), "one POST per booking: the lookup settled the lost one")
	assert.Len(t, s.Events(), 2)

	for i, b := range []string{"acuity-m2-cancel-1", "acuity-m2-cancel-2"} {
		del, _ := w.insert(t, process.Step{Kind: process.CalendarDelete, Thread: "acuity-m2", Booking: b, State: process.StatePending, Start: slot2[0], End: slot2[1]})
		state, note, err := w.work(t, del)
		require.NoError(t, err)
		assert.Equal(t, "done", state, "delete %d", i+1)
		if i == 1 {
			assert.Equal(t, "already gone", note)
		}
	}
	assert.Len(t, s.Events(), 1)
}
