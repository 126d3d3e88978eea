package postgres_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

// A seated booking's attendees are saved by seat (seat_contacts) beside the booking's own contact,
// in one commit and across a group's deliveries alike; a seat's newer address wins.
func TestCommitSavesSeatContactsBesideTheBookingsOwn(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	a, b := streamName(t), streamName(t)
	withSeats := func(c ledger.Commit, contacts ...ledger.Contact) ledger.Commit {
		c.Personal.Contacts = contacts
		return c
	}
	ba, bb := bookingOf(a), bookingOf(b)
	_, errs := commitHeldGroup(t, s, []ledger.Commit{
		withSeats(commitOf("d-a1", appendOf(a, eventlog.NoStream(), event(t, "booking.seat_added.v1"))),
			ledger.Contact{Booking: ba, Email: "first@example.com"},
			ledger.Contact{Booking: ba, Seat: "s1", Email: "first@example.com"}),
		withSeats(commitOf("d-b1", appendOf(b, eventlog.NoStream(), event(t, "booking.seat_added.v1"))),
			ledger.Contact{Booking: bb, Seat: "s1", Email: "other@example.com"},
			ledger.Contact{Booking: bb, Seat: "s2", Email: "old@example.com"},
			ledger.Contact{Booking: bb, Seat: "s2", Email: "second@example.com"}),
	})
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	_, err := s.Commit(ctx, withSeats(commitOf("d-a2", appendOf(a, eventlog.Any(), event(t, "booking.seat_added.v1"))),
		ledger.Contact{Booking: ba, Email: "first@example.com"},
		ledger.Contact{Booking: ba, Seat: "s2", Email: "joiner@example.com", Name: "Joiner"}))
	require.NoError(t, err)

	assert.Equal(t, "first@example.com", contactOf(t, pool, ba), "the booking's own contact stays its first attendee")
	assert.Empty(t, contactOf(t, pool, bb), "a seat's contact is not the booking's")
	seatOf := func(bk, seat string) string {
		var email string
		_ = pool.QueryRow(ctx, `SELECT email || ' ' || name FROM seat_contacts WHERE booking = $1 AND seat = $2`, bk, seat).Scan(&email)
		return email
	}
	assert.Equal(t, "first@example.com ", seatOf(string(ba), "s1"))
	assert.Equal(t, "joiner@example.com Joiner", seatOf(string(ba), "s2"))
	assert.Equal(t, "other@example.com ", seatOf(string(bb), "s1"))
	assert.Equal(t, "second@example.com ", seatOf(string(bb), "s2"), "a delivery's last address of a seat wins")
	assert.Equal(t, 4, count(t, pool, `SELECT count(*) FROM seat_contacts`))
}
