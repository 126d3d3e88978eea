package process_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
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
		_, err := pool.Exec(ctx, `INSERT INTO calendar_bookings (booking, provider, status, during) VALUES ($1, 'acuity', 'active', tstzrange($2, $3))`,
			b, moved, moved.Add(time.Hour))
		require.NoError(t, err)
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO process_steps (key, kind, thread, booking, answers, resource, slot_start, slot_end)
VALUES ($1, 'host_calendar.create', $2, $2, 'active', 'host-1', $3, $4) RETURNING id`, uuid.New(), b, start, end).Scan(&id))
		return id
	}
	work := func(id int64) (state, note string) {
		job := &river.Job[process.StepArgs]{JobRow: &rivertype.JobRow{Attempt: 1, MaxAttempts: process.DefaultMaxAttempts}, Args: process.StepArgs{Step: id}}
		require.NoError(t, w.Work(ctx, job))
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
