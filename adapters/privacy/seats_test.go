package privacy_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/privacy"
	"bookingledger/domain/ledger"
)

// A seated booking's attendees each have a contact by seat (seat_contacts): the erasure of the booking
// removes them all, and the address of any attendee finds the booking.
func TestEraseRemovesTheSeatContacts(t *testing.T) {
	t.Parallel()
	pool := spares.Database(t)
	ctx := context.Background()
	e := newEnv(t, pool, keyA)
	e.deliver(t, "calcom-seated", "s1", []byte(`{"attendees":["first@example.com","second@example.com"]}`),
		ledger.Contact{Booking: "calcom-seated", Email: "first@example.com", Name: "First Seat"},
		ledger.Contact{Booking: "calcom-seated", Seat: "seat-1", Email: "first@example.com", Name: "First Seat"},
		ledger.Contact{Booking: "calcom-seated", Seat: "seat-2", Email: "second@example.com", Name: "Second Seat"})
	e.deliver(t, "calcom-other", "o1", []byte(`{"email":"other@example.com"}`),
		ledger.Contact{Booking: "calcom-other", Seat: "seat-9", Email: "other@example.com", Name: "Other Seat"})
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM seat_contacts`).Scan(&n))
	require.Equal(t, 3, n, "each seat's contact is kept beside the booking's own")

	er, err := privacy.NewEraser(pool, e.bodies, owners(pool)).Erase(ctx, privacy.Request{Email: "Second@example.com", By: "test"})
	require.NoError(t, err)
	assert.Equal(t, []string{"calcom-seated"}, er.Bookings, "a seat's address finds its booking")
	assert.EqualValues(t, 3, er.Counts.Contacts, "the booking's contact and its two seats' contacts")
	d := dump(t, pool)
	for _, gone := range []string{"first@example.com", "second@example.com", "First Seat", "Second Seat"} {
		assert.NotContains(t, string(d), gone)
		assert.False(t, bytes.Contains(d, hexOf(gone)), gone)
	}
	assert.Contains(t, string(d), "other@example.com", "another booking's seat contact stays")

	// A redelivery after the erasure saves no seat contact again.
	e.deliver(t, "calcom-seated", "s2", []byte(`{}`),
		ledger.Contact{Booking: "calcom-seated", Seat: "seat-2", Email: "second@example.com", Name: "Second Seat"})
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM seat_contacts WHERE booking = 'calcom-seated'`).Scan(&n))
	assert.Zero(t, n)
}
