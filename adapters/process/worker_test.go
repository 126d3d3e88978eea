package process_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/caldav"
	"bookingledger/adapters/caldav/caldavsink"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/process"
)

// workerWorld is a migrated database, a CalDAV server that counts the requests it gets, and one step
// worker acting on it, called directly with a job (no River client): the claim's rules, one at a time.
type workerWorld struct {
	pool     *pgxpool.Pool
	sink     *caldavsink.Server
	requests atomic.Int32
	worker   *process.Worker
}

// newWorkerWorld starts the world; fault (optional) answers the server's requests first, and hold
// (optional) is the worker's HoldAfterCall.
func newWorkerWorld(t *testing.T, fault func(*http.Request) int, hold func(ctx context.Context, w *workerWorld, s process.Step)) *workerWorld {
	t.Helper()
	w := &workerWorld{pool: pgtest.NewDatabase(t)}
	var err error
	w.sink, err = caldavsink.Start(caldavsink.Config{Fault: func(r *http.Request) int {
		w.requests.Add(1)
		if fault != nil {
			return fault(r)
		}
		return 0
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.sink.Close() })
	target, err := caldav.New(caldav.Config{URLTemplate: w.sink.URL() + "/dav/{resource}/bookings/", AllowPrivate: true})
	require.NoError(t, err)
	cfg := process.WorkerConfig{Pool: w.pool, Calendar: target, CallTimeout: 5 * time.Second}
	if hold != nil {
		cfg.HoldAfterCall = func(ctx context.Context, s process.Step) { hold(ctx, w, s) }
	}
	w.worker, err = process.NewWorker(cfg)
	require.NoError(t, err)
	return w
}

// step inserts, as the planner would, a step of kind host_calendar.create for booking b at
// [start, end), and the booking's calendar row, active at the slot cal.
func (w *workerWorld) step(t *testing.T, b string, cal [2]time.Time, start, end time.Time) int64 {
	t.Helper()
	ctx := context.Background()
	_, err := w.pool.Exec(ctx, `INSERT INTO calendar_bookings (booking, provider, status, during) VALUES ($1, 'acuity', 'active', tstzrange($2, $3))`, b, cal[0], cal[1])
	require.NoError(t, err)
	var id int64
	require.NoError(t, w.pool.QueryRow(ctx, `INSERT INTO process_steps (key, kind, thread, booking, answers, resource, slot_start, slot_end)
VALUES ($1, 'host_calendar.create', $2, $2, 'active', 'host-1', $3, $4) RETURNING id`, uuid.New(), b, start, end).Scan(&id))
	return id
}

// work runs the step's job once and returns what it returned and the step's state and note after.
func (w *workerWorld) work(t *testing.T, id int64) (state, note string, err error) {
	t.Helper()
	return w.workAttempt(t, id, 1)
}

// workAttempt is work as the job's attempt-th attempt (of process.DefaultMaxAttempts).
func (w *workerWorld) workAttempt(t *testing.T, id int64, attempt int) (state, note string, err error) {
	t.Helper()
	ctx := context.Background()
	err = w.worker.Work(ctx, &river.Job[process.StepArgs]{
		JobRow: &rivertype.JobRow{Attempt: attempt, MaxAttempts: process.DefaultMaxAttempts}, Args: process.StepArgs{Step: id}})
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT state, note FROM process_steps WHERE id = $1`, id).Scan(&state, &note))
	return state, note, err
}

// A step runs only while the calendar still says what it was planned for. The calendar moves on
// before the process projection does (an Acuity move, applied by the calendar's runner first), so a
// worker can take a create planned for the old slot: it is skipped, and the CalDAV server hears
// nothing of it. A step whose slot the calendar still has is carried out, by the same worker.
func TestWorkerSkipsAStepTheCalendarMovedAwayFrom(t *testing.T) {
	w := newWorkerWorld(t, nil, nil)
	old := time.Date(2031, 3, 3, 9, 0, 0, 0, time.UTC)
	moved := [2]time.Time{old.Add(2 * time.Hour), old.Add(3 * time.Hour)}
	// Moved so that only the start differs, or only the end.
	for _, c := range [][2]time.Time{{old, moved[1]}, {moved[0], moved[1].Add(time.Hour)}} {
		state, note, err := w.work(t, w.step(t, "acuity-moved-"+c[0].Format("1504")+c[1].Format("1504"), moved, c[0], c[1]))
		require.NoError(t, err)
		assert.Equal(t, "skipped", state)
		assert.Contains(t, note, "no longer active at this slot")
	}
	assert.Zero(t, w.requests.Load(), "nothing was sent for the old slots")

	state, _, err := w.work(t, w.step(t, "acuity-kept", moved, moved[0], moved[1]))
	require.NoError(t, err)
	assert.Equal(t, "done", state)
	require.Len(t, w.sink.Store.Objects(), 1)
	assert.True(t, w.sink.Store.Objects()[0].Start.Equal(moved[0]))
}

// A step another worker holds (requested, its lease running) is not taken: the job waits for the
// lease, and the target hears nothing.
func TestWorkerLeavesAStepUnderAnotherWorkersLease(t *testing.T) {
	w := newWorkerWorld(t, nil, nil)
	start := time.Date(2031, 3, 4, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	id := w.step(t, "acuity-leased", slot, slot[0], slot[1])
	_, err := w.pool.Exec(context.Background(), `UPDATE process_steps SET state = 'requested', attempts = 1, lease_until = now() + interval '1 minute' WHERE id = $1`, id)
	require.NoError(t, err)

	state, _, err := w.work(t, id)
	var snooze *river.JobSnoozeError
	require.ErrorAs(t, err, &snooze, "the job waits for the lease")
	assert.Greater(t, snooze.Duration, 50*time.Second)
	assert.Equal(t, "requested", state)
	var attempts int
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT attempts FROM process_steps WHERE id = $1`, id).Scan(&attempts))
	assert.Equal(t, 1, attempts)
	assert.Zero(t, w.requests.Load())
}

// A worker's outcome is recorded only while the step is still the worker's: one that an operator
// resolved (or another worker finished) while the call was out keeps that state.
func TestWorkerDoesNotOverwriteAStepResolvedDuringItsCall(t *testing.T) {
	w := newWorkerWorld(t, func(r *http.Request) int {
		if r.Method == http.MethodPut {
			return http.StatusServiceUnavailable // proves nothing was written: the step would go back to pending
		}
		return 0
	}, func(ctx context.Context, w *workerWorld, s process.Step) {
		_, err := w.pool.Exec(ctx, `UPDATE process_steps SET state = 'done', note = 'marked done by an operator' WHERE id = $1`, s.ID)
		require.NoError(t, err)
	})
	start := time.Date(2031, 3, 5, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	state, note, _ := w.work(t, w.step(t, "acuity-resolved", slot, slot[0], slot[1])) // the 503 asks for a retry
	assert.Equal(t, "done", state)
	assert.Equal(t, "marked done by an operator", note)
}

// A call that proved nothing was done goes back to pending and its job retries; on the job's last
// attempt the step has failed (it would otherwise stay pending with no job left to run it).
func TestWorkerGivesUpOnTheLastAttempt(t *testing.T) {
	w := newWorkerWorld(t, func(r *http.Request) int {
		if r.Method == http.MethodPut {
			return http.StatusServiceUnavailable
		}
		return 0
	}, nil)
	start := time.Date(2031, 3, 6, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}

	state, _, err := w.workAttempt(t, w.step(t, "acuity-retried", slot, slot[0], slot[1]), process.DefaultMaxAttempts-1)
	require.Error(t, err, "River retries the job")
	assert.Equal(t, "pending", state)

	state, note, err := w.workAttempt(t, w.step(t, "acuity-given-up", slot, slot[0], slot[1]), process.DefaultMaxAttempts)
	require.NoError(t, err, "nothing left to retry")
	assert.Equal(t, "failed", state)
	assert.Equal(t, fmt.Sprintf("gave up after %d attempts", process.DefaultMaxAttempts), note)
	assert.Empty(t, w.sink.Store.Objects())
}

// NextRetry doubles the delay from RetryBase at each attempt, up to RetryMax.
func TestWorkerRetryDelaysDoubleUpToTheMax(t *testing.T) {
	w, err := process.NewWorker(process.WorkerConfig{Pool: &pgxpool.Pool{}, RetryBase: time.Second, RetryMax: 5 * time.Minute})
	require.NoError(t, err)
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 9: 256 * time.Second,
		10: 5 * time.Minute, 25: 5 * time.Minute} {
		before := time.Now()
		at := w.NextRetry(&river.Job[process.StepArgs]{JobRow: &rivertype.JobRow{Attempt: attempt}})
		after := time.Now()
		assert.False(t, at.Before(before.Add(want)) || at.After(after.Add(want)), "attempt %d: retry %v after, want %v", attempt, at.Sub(before), want)
	}
}

// A claim leases the step for twice the call timeout (docs/process-steps.md): the call, bounded by
// the timeout, ends inside the lease, so no other worker takes the step over while it is out.
func TestWorkerLeasesTheStepForTwiceTheCallTimeout(t *testing.T) {
	var lease time.Duration
	w := newWorkerWorld(t, nil, func(ctx context.Context, w *workerWorld, s process.Step) {
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT lease_until - requested_at FROM process_steps WHERE id = $1`, s.ID).Scan(&lease))
	})
	start := time.Date(2031, 3, 7, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	state, _, err := w.work(t, w.step(t, "acuity-leased-by-claim", slot, slot[0], slot[1]))
	require.NoError(t, err)
	assert.Equal(t, "done", state)
	assert.Equal(t, 2*5*time.Second, lease, "the claim's lease (the world's call timeout is 5s)")
}
