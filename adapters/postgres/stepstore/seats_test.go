package stepstore

import (
	"bookingledger/adapters/process"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
)

// TestPlanSeatCancellationsOnePerLeavingSeat: each attendee leaving a seated booking gets one
// seat-cancellation step, keyed by booking and seat and naming the seat; a removal the fold did not
// take (an unknown seat) plans none; the last attendee leaving plans theirs too (the claim decides
// whether the booking's own cancellation tells them instead); replaying the log plans nothing new.
func TestPlanSeatCancellationsOnePerLeavingSeat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPlanWorld(t)
	host := "https://api.calendly.com/users/HOST-S"
	slot := slotAt(t1, "m-s", host)
	a, b := booking.Seat{UID: "seat-a", Attendee: "email-sha256:aaaa"}, booking.Seat{Attendee: "email-sha256:bbbb"}
	for _, e := range []booking.Event{
		planEvent("calendly-s1", "seat a", t1.Add(-72*time.Hour), booking.SeatAdded{Slot: slot, Capacity: 3, Seat: a}),
		planEvent("calendly-s1", "seat b", t1.Add(-71*time.Hour), booking.SeatAdded{Slot: slot, Capacity: 3, Seat: b}),
		planEvent("calendly-s1", "seat x left", t1.Add(-70*time.Hour), booking.SeatRemoved{Seat: booking.Seat{Attendee: "email-sha256:xxxx"}}),
		planEvent("calendly-s1", "seat b left", t1.Add(-69*time.Hour), booking.SeatRemoved{Seat: b}),
		planEvent("calendly-s1", "seat a left", t1.Add(-68*time.Hour), booking.SeatRemoved{Seat: a}),
	} {
		w.record(t, e)
		w.catchUp(t, w.calendar, "calendar")
		w.catchUp(t, w.process, ProjectionName)
	}
	seatSteps := func() map[string]string {
		rows, err := w.pool.Query(ctx, `SELECT seat, key::text FROM process_steps WHERE kind = $1`, string(process.EmailSeatCancellation))
		require.NoError(t, err)
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var seat, key string
			require.NoError(t, rows.Scan(&seat, &key))
			out[seat] = key
		}
		return out
	}
	want := map[string]string{"email-sha256:bbbb": process.SeatStepKey("calendly-s1", "email-sha256:bbbb").String(),
		"seat-a": process.SeatStepKey("calendly-s1", "seat-a").String()}
	assert.Equal(t, want, seatSteps(), "one per leaving seat, none for the unknown one")
	var total int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM process_steps`).Scan(&total))

	// A replay of the whole log (a rebuild) plans the same keys and nothing else.
	_, err := w.pool.Exec(ctx, `UPDATE projection_checkpoints SET commit_position = 0, prepare_position = 0, events_applied = 0 WHERE name = $1`, ProjectionName)
	require.NoError(t, err)
	w.catchUp(t, w.process, ProjectionName)
	assert.Equal(t, want, seatSteps())
	var again int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM process_steps`).Scan(&again))
	assert.Equal(t, total, again)
}
