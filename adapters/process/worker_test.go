package process_test

import (
	"context"
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

// A step runs only while the calendar still says what it was planned for. The calendar moves on
// before the process projection does (an Acuity move, applied by the calendar's runner first), so a
// worker can take a create planned for the old slot: it is skipped, and the CalDAV server hears
// nothing of it. A step whose slot the calendar still has is carried out, by the same worker.
func TestWorkerSkipsAStepTheCalendarMovedAwayFrom(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDatabase(t)
	var requests atomic.Int32
	sink, err := caldavsink.Start(caldavsink.Config{Fault: func(*http.Request) int { requests.Add(1); return 0 }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	target, err := caldav.New(caldav.Config{URLTemplate: sink.URL() + "/dav/{resource}/bookings/", AllowPrivate: true})
	require.NoError(t, err)
	w, err := process.NewWorker(process.WorkerConfig{Pool: pool, Calendar: target, CallTimeout: 5 * time.Second})
	require.NoError(t, err)

	old := time.Date(2031, 3, 3, 9, 0, 0, 0, time.UTC)
	moved := old.Add(2 * time.Hour)
	step := func(b string, start, end time.Time) int64 {
		return testStep(t, pool, b, [2]time.Time{moved, moved.Add(time.Hour)}, start, end)
	}
	work := func(id int64) (state, note string) {
		require.NoError(t, w.Work(ctx, testJob(id)))
		require.NoError(t, pool.QueryRow(ctx, `SELECT state, note FROM process_steps WHERE id = $1`, id).Scan(&state, &note))
		return state, note
	}

	// Moved, so that only the start differs, or only the end.
	for _, c := range [][2]time.Time{{old, moved.Add(time.Hour)}, {moved, moved.Add(2 * time.Hour)}} {
		state, note := work(step("acuity-moved-"+c[0].Format("1504")+c[1].Format("1504"), c[0], c[1]))
		assert.Equal(t, "skipped", state)
		assert.Contains(t, note, "no longer active at this slot")
	}
	assert.Zero(t, requests.Load(), "nothing was sent for the old slots")

	state, _ := work(step("acuity-kept", moved, moved.Add(time.Hour)))
	assert.Equal(t, "done", state)
	require.Len(t, sink.Store.Objects(), 1)
	assert.True(t, sink.Store.Objects()[0].Start.Equal(moved))
}

// testStep inserts, as the planner would, a step of kind host_calendar.create for booking b at
// [start, end), and the booking's calendar row, active at the slot cal.
func testStep(t *testing.T, pool *pgxpool.Pool, b string, cal [2]time.Time, start, end time.Time) int64 {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `INSERT INTO calendar_bookings (booking, provider, status, during) VALUES ($1, 'acuity', 'active', tstzrange($2, $3))`, b, cal[0], cal[1])
	require.NoError(t, err)
	var id int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO process_steps (key, kind, thread, booking, answers, resource, slot_start, slot_end)
VALUES ($1, 'host_calendar.create', $2, $2, 'active', 'host-1', $3, $4) RETURNING id`, uuid.New(), b, start, end).Scan(&id))
	return id
}

func testJob(id int64) *river.Job[process.StepArgs] {
	return &river.Job[process.StepArgs]{JobRow: &rivertype.JobRow{Attempt: 1, MaxAttempts: process.DefaultMaxAttempts}, Args: process.StepArgs{Step: id}}
}

// A step another worker holds (requested, its lease running) is not taken: the job waits for the
// lease, and the target hears nothing.
func TestWorkerLeavesAStepUnderAnotherWorkersLease(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDatabase(t)
	var requests atomic.Int32
	sink, err := caldavsink.Start(caldavsink.Config{Fault: func(*http.Request) int { requests.Add(1); return 0 }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	target, err := caldav.New(caldav.Config{URLTemplate: sink.URL() + "/dav/{resource}/bookings/", AllowPrivate: true})
	require.NoError(t, err)
	w, err := process.NewWorker(process.WorkerConfig{Pool: pool, Calendar: target, CallTimeout: 5 * time.Second})
	require.NoError(t, err)
	start := time.Date(2031, 3, 4, 9, 0, 0, 0, time.UTC)
	id := testStep(t, pool, "acuity-leased", [2]time.Time{start, start.Add(time.Hour)}, start, start.Add(time.Hour))
	_, err = pool.Exec(ctx, `UPDATE process_steps SET state = 'requested', attempts = 1, lease_until = now() + interval '1 minute' WHERE id = $1`, id)
	require.NoError(t, err)

	err = w.Work(ctx, testJob(id))
	var snooze *river.JobSnoozeError
	require.ErrorAs(t, err, &snooze, "the job waits for the lease")
	assert.Greater(t, snooze.Duration, 50*time.Second)
	var state string
	var attempts int
	require.NoError(t, pool.QueryRow(ctx, `SELECT state, attempts FROM process_steps WHERE id = $1`, id).Scan(&state, &attempts))
	assert.Equal(t, "requested", state)
	assert.Equal(t, 1, attempts)
	assert.Zero(t, requests.Load())
}

// A worker's outcome is recorded only while the step is still the worker's: one that an operator
// resolved (or another worker finished) while the call was out keeps that state.
func TestWorkerDoesNotOverwriteAStepResolvedDuringItsCall(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewDatabase(t)
	sink, err := caldavsink.Start(caldavsink.Config{Fault: func(r *http.Request) int {
		if r.Method == http.MethodPut {
			return http.StatusServiceUnavailable // proves nothing was written: the step would go back to pending
		}
		return 0
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	target, err := caldav.New(caldav.Config{URLTemplate: sink.URL() + "/dav/{resource}/bookings/", AllowPrivate: true})
	require.NoError(t, err)
	start := time.Date(2031, 3, 5, 9, 0, 0, 0, time.UTC)
	id := testStep(t, pool, "acuity-resolved", [2]time.Time{start, start.Add(time.Hour)}, start, start.Add(time.Hour))
	w, err := process.NewWorker(process.WorkerConfig{Pool: pool, Calendar: target, CallTimeout: 5 * time.Second,
		HoldAfterCall: func(ctx context.Context, s process.Step) {
			_, err := pool.Exec(ctx, `UPDATE process_steps SET state = 'done', note = 'marked done by an operator' WHERE id = $1`, s.ID)
			require.NoError(t, err)
		}})
	require.NoError(t, err)

	_ = w.Work(ctx, testJob(id)) // the 503 asks for a retry
	var state, note string
	require.NoError(t, pool.QueryRow(ctx, `SELECT state, note FROM process_steps WHERE id = $1`, id).Scan(&state, &note))
	assert.Equal(t, "done", state)
	assert.Equal(t, "marked done by an operator", note)
}
