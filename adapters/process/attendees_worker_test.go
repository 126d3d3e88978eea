package process_test

import (
	"bookingledger/adapters/postgres/stepstore"
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/jobs"
	"bookingledger/adapters/process"
	"bookingledger/projections/steps"
)

// A seated booking's Google event lists the attendees the calendar holds, in its description (never
// in attendees), and the claim records the state it wrote. An update planned for seats that changed
// since is skipped (the current seats' update follows). An erasure plans, in its transaction, the
// update (with its job) that writes the event again: the erased attendee's name and address are
// gone from it, read back from the fake.
func TestWorkerWritesAttendeesAndAnErasureRewritesThem(t *testing.T) {
	ctx := context.Background()
	w, s := googleWorld(t, 5*time.Second)
	_, err := jobs.Migrate(ctx, w.pool, nil) // River's tables: the erasure inserts the update's job
	require.NoError(t, err)
	start := time.Date(2031, 6, 9, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	const b = "calcom-seated1"
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := w.pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	id := w.step(t, b, slot, slot[0], slot[1])
	exec(`UPDATE calendar_bookings SET seats = '{a,b}' WHERE booking = $1`, b)
	exec(`INSERT INTO seat_contacts (booking, seat, email, name) VALUES ($1, 'a', 'ada@example.com', 'Ada'), ($1, 'b', 'bob@example.com', 'Bob')`, b)
	state, note, err := w.work(t, id)
	require.NoError(t, err)
	require.Equal(t, "done", state, note)
	events := s.Events("primary")
	require.Len(t, events, 1)
	assert.Contains(t, events[0].Description, "Attendees:\n- Ada <ada@example.com>\n- Bob <bob@example.com>")
	var written string
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT attendees FROM process_steps WHERE id = $1`, id).Scan(&written))
	assert.Equal(t, steps.AttendeeDigest([]string{"b", "a"}), written, "the claim records the state it writes")

	// An update planned for {a} while the calendar holds {a, b}: superseded, nothing written.
	stale, _ := w.insert(t, process.Step{Kind: process.CalendarUpdate, Booking: b, State: process.StatePending, Start: slot[0], End: slot[1]})
	exec(`UPDATE process_steps SET attendees = $2 WHERE id = $1`, stale, steps.AttendeeDigest([]string{"a"}))
	state, note, err = w.work(t, stale)
	require.NoError(t, err)
	assert.Equal(t, "skipped", state)
	assert.Contains(t, note, "superseded: the attendees")

	// Ada is erased (her seat's contact goes with the contacts' owner's part; this is the steps').
	exec(`DELETE FROM seat_contacts WHERE booking = $1 AND seat = 'a'`, b)
	require.NoError(t, pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		_, _, err := stepstore.EraseSteps(ctx, tx, []string{b}, time.Now())
		return err
	}))
	var update int64
	var jobs int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT id, (SELECT count(*) FROM river_job j WHERE j.args @> jsonb_build_object('step', s.id))
FROM process_steps s WHERE booking = $1 AND kind = 'host_calendar.update' AND state = 'pending'`, b).Scan(&update, &jobs))
	assert.Equal(t, 1, jobs, "the erasure's update has its job")
	state, note, err = w.work(t, update)
	require.NoError(t, err)
	require.Equal(t, "done", state, note)
	got := s.Events("primary")[0].Description
	assert.Contains(t, got, "Attendees:\n- Bob <bob@example.com>")
	assert.NotContains(t, got, "ada@example.com")
	assert.NotContains(t, got, "Ada")

	// Erasing again with nothing changed since plans one more rewrite, never a second of the same.
	require.NoError(t, pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
		_, _, err := stepstore.EraseSteps(ctx, tx, []string{b}, time.Now())
		return err
	}))
	var pending int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM process_steps WHERE booking = $1 AND state = 'pending'`, b).Scan(&pending))
	assert.Equal(t, 1, pending)
}
