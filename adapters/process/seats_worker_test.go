package process_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/process"
)

// A seat's cancellation goes to that seat's contact and to nobody else; once the booking has ended,
// the booking's contact is told by the booking's own cancellation, never twice: their seat's
// cancellation is skipped, or, when it was sent while the booking was still active, the booking's is.
func TestWorkerTellsEachLeavingSeatOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newMailWorld(t, nil)
	start := time.Date(2027, 3, 15, 10, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(30 * time.Minute)}
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := w.pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	seatStep := func(b, seat string) int64 {
		t.Helper()
		id, _ := w.insert(t, process.Step{Kind: process.EmailSeatCancellation, Booking: b, State: process.StatePending, Start: slot[0], End: slot[1]})
		exec(`UPDATE process_steps SET seat = $2 WHERE id = $1`, id, seat)
		return id
	}
	for _, b := range []string{"calcom-one", "calcom-two"} {
		exec(`INSERT INTO contacts (booking, email, name) VALUES ($1, 'ada@example.com', 'Ada')`, b)
		exec(`INSERT INTO seat_contacts (booking, seat, email, name) VALUES ($1, 'a', 'ADA@example.com', 'Ada'), ($1, 'b', 'bob@example.com', 'Bob')`, b)
	}

	// calcom-one: bob leaves while the booking is active; then ada, the contact, leaves last.
	w.calendarRow(t, "calcom-one", "active", slot)
	state, note, err := w.work(t, seatStep("calcom-one", "b"))
	require.NoError(t, err)
	assert.Equal(t, "done", state, note)
	exec(`UPDATE calendar_bookings SET status = 'canceled' WHERE booking = 'calcom-one'`)
	state, note, err = w.work(t, seatStep("calcom-one", "a"))
	require.NoError(t, err)
	assert.Equal(t, "skipped", state, "the booking's own cancellation tells its contact")
	assert.Contains(t, note, "its own cancellation tells this attendee")
	id, _ := w.insert(t, process.Step{Kind: process.EmailCancellation, Booking: "calcom-one", State: process.StatePending, Start: slot[0], End: slot[1]})
	state, note, err = w.work(t, id)
	require.NoError(t, err)
	assert.Equal(t, "done", state, note)

	// calcom-two: ada, the contact, leaves while the booking is active; bob leaves last.
	w.calendarRow(t, "calcom-two", "active", slot)
	state, note, err = w.work(t, seatStep("calcom-two", "a"))
	require.NoError(t, err)
	assert.Equal(t, "done", state, note)
	exec(`UPDATE calendar_bookings SET status = 'canceled' WHERE booking = 'calcom-two'`)
	state, note, err = w.work(t, seatStep("calcom-two", "b"))
	require.NoError(t, err)
	assert.Equal(t, "done", state, note)
	id, _ = w.insert(t, process.Step{Kind: process.EmailCancellation, Booking: "calcom-two", State: process.StatePending, Start: slot[0], End: slot[1]})
	state, note, err = w.work(t, id)
	require.NoError(t, err)
	assert.Equal(t, "skipped", state, "its contact had their own seat's cancellation")
	assert.Contains(t, note, "not told twice")

	var got []string
	for _, m := range w.smtp.Delivered() {
		kind, _, _ := strings.Cut(m.Subject, ":")
		got = append(got, kind+" "+m.To[0])
	}
	assert.ElementsMatch(t, []string{"Seat canceled bob@example.com", "Booking canceled ada@example.com",
		"Seat canceled ADA@example.com", "Seat canceled bob@example.com"}, got)
}
