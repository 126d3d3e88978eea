package stepstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/domain/booking"
	"bookingledger/projections/steps"
)

// seatOrders returns every order of n items.
func seatOrders(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, rest := range seatOrders(n - 1) {
		for i := 0; i <= len(rest); i++ {
			out = append(out, slices.Insert(slices.Clone(rest), i, n-1))
		}
	}
	return out
}

// TestSeatStepsAreTheSameUnderEveryArrivalOrderAndRebuild (issue #35): three attendees take seats
// of a booking, the third leaves and a fourth takes the freed seat. Under every arrival order of the
// five events, with one of them delivered twice (right after itself or at the end), applied round by
// round with the steps of each round effected before the next (as workers would, each calendar step
// recording the seats it wrote), every order plans exactly one seat cancellation, the leaver's, and
// no other seat's: a cancel that arrived before its seat's create is planned with the create. A
// rebuild of the process projection (its checkpoint rewound, the whole log replayed) then plans,
// skips and revives nothing: every step, emails included, is as incremental planning left it.
func TestSeatStepsAreTheSameUnderEveryArrivalOrderAndRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPlanWorld(t)
	host := "https://api.calendly.com/users/HOST-SEATS"

	type run struct {
		id       booking.ID
		sequence []booking.Event
	}
	var runs []run
	for i, order := range seatOrders(5) {
		id := booking.ID(fmt.Sprintf("calendly-order%d", i))
		seat := func(s string) booking.Seat {
			return booking.Seat{UID: fmt.Sprintf("order%d-%s", i, s), Attendee: "email-sha256:" + s}
		}
		slot := slotAt(t1.Add(time.Duration(i)*time.Hour), fmt.Sprintf("m-order%d", i), host)
		all := []booking.Event{
			planEvent(id, "a takes a seat", t1.Add(-72*time.Hour), booking.SeatAdded{Slot: slot, Capacity: 3, Seat: seat("a")}),
			planEvent(id, "b takes a seat", t1.Add(-71*time.Hour), booking.SeatAdded{Slot: slot, Capacity: 3, Seat: seat("b")}),
			planEvent(id, "c takes a seat", t1.Add(-70*time.Hour), booking.SeatAdded{Slot: slot, Capacity: 3, Seat: seat("c")}),
			planEvent(id, "c leaves", t1.Add(-60*time.Hour), booking.SeatRemoved{Seat: seat("c")}),
			planEvent(id, "d takes the freed seat", t1.Add(-50*time.Hour), booking.SeatAdded{Slot: slot, Capacity: 3, Seat: seat("d")}),
		}
		r := run{id: id}
		for _, k := range order {
			r.sequence = append(r.sequence, all[k])
		}
		again := all[order[i%5]]
		if i%2 == 0 {
			r.sequence = slices.Insert(r.sequence, slices.Index(order, order[i%5])+1, again)
		} else {
			r.sequence = append(r.sequence, again)
		}
		runs = append(runs, r)
	}

	// effect marks every pending step done, as a worker that claimed it would leave it; a calendar
	// step of a seated booking records the seats the calendar holds at its claim.
	effect := func() {
		t.Helper()
		q, err := w.pool.Query(ctx, `SELECT p.key::text, p.kind, coalesce(b.seats, '{}'), b.seats IS NOT NULL FROM process_steps p
LEFT JOIN calendar_bookings b ON b.booking = p.booking WHERE p.state = 'pending'`)
		require.NoError(t, err)
		type pending struct {
			Key, Kind string
			Seats     []string
			Seated    bool
		}
		open, err := pgx.CollectRows(q, pgx.RowToStructByPos[pending])
		require.NoError(t, err)
		batch := &pgx.Batch{}
		for _, p := range open {
			attendees := ""
			if p.Seated && steps.Kind(p.Kind).IsCalendar() {
				attendees = steps.AttendeeDigest(p.Seats)
			}
			batch.Queue(`UPDATE process_steps SET state = 'done', attempts = 1, attendees = $2, finished_at = now() WHERE key = $1::uuid`, p.Key, attendees)
		}
		require.NoError(t, w.pool.SendBatch(ctx, batch).Close())
	}
	for round := range 6 {
		for _, r := range runs {
			w.record(t, r.sequence[round])
		}
		w.catchUp(t, w.calendar, readmodel.ProjectionName)
		w.catchUp(t, w.process, ProjectionName)
		effect()
	}

	all := func() []string {
		t.Helper()
		q, err := w.pool.Query(ctx, `SELECT concat_ws(' ', booking, kind, seat, key::text, state, attendees, note) FROM process_steps ORDER BY key`)
		require.NoError(t, err)
		out, err := pgx.CollectRows(q, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	for _, r := range runs {
		var names []string
		for _, e := range r.sequence {
			names = append(names, e.ProviderRef)
		}
		var seats []string
		q, err := w.pool.Query(ctx, `SELECT seat || ' ' || key::text FROM process_steps WHERE booking = $1 AND kind = $2`,
			string(r.id), string(steps.EmailSeatCancellation))
		require.NoError(t, err)
		seats, err = pgx.CollectRows(q, pgx.RowTo[string])
		require.NoError(t, err)
		leaver := string(r.id)[len("calendly-"):] + "-c"
		assert.Equal(t, []string{leaver + " " + steps.SeatStepKey(string(r.id), leaver).String()}, seats,
			"%v: the leaver's cancellation, once, and nobody else's", names)
	}
	before := all()
	require.NotEmpty(t, before)

	// `bookingledger rebuild process`: the checkpoint goes back (as Projection.Reset does), the log is
	// replayed.
	_, err := w.pool.Exec(ctx, `UPDATE projection_checkpoints SET commit_position = 0, prepare_position = 0, events_applied = 0 WHERE name = $1`, ProjectionName)
	require.NoError(t, err)
	w.catchUp(t, w.process, ProjectionName)
	assert.Equal(t, before, all(), "a rebuild of the process projection plans exactly what incremental planning did")
}
