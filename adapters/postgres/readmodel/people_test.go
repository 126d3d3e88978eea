package readmodel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
)

// TestContactsAndSearchReadTheContactsTable: invitees by booking and a search by id, name or email
// (parts, any case, LIKE's wildcards taken literally), newest slot first, the exact id before the
// rest; a deleted contact (erasure) is gone from both, and its booking is still found by id.
func TestContactsAndSearchReadTheContactsTable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for i, b := range []booking.ID{"calendly-a1", "calendly-a10", "acuity-7"} {
		e.deliver(t, one("d-"+string(b), created(b, at(0, i), slot("m-"+string(b), at(9+i, 0), 30, "host-"+string(b)))))
	}
	e.catchUp(t)
	_, err := e.pool.Exec(ctx, `INSERT INTO contacts (booking, email, name) VALUES
		('calendly-a1', 'ada.lovelace@example.com', 'Ada Lovelace'), ('calendly-a10', 'grace@example.com', 'Grace Hopper'),
		('acuity-7', 'x_y%z@example.com', '')`)
	require.NoError(t, err)

	cs, err := e.rm.Contacts(ctx, []booking.ID{"calendly-a1", "acuity-7", "calendly-none"})
	require.NoError(t, err)
	assert.Equal(t, map[booking.ID]calendar.Contact{
		"calendly-a1": {Booking: "calendly-a1", Name: "Ada Lovelace", Email: "ada.lovelace@example.com"},
		"acuity-7":    {Booking: "acuity-7", Email: "x_y%z@example.com"},
	}, cs)

	found := func(text string) []string {
		t.Helper()
		hits, err := e.rm.Search(ctx, text, 0)
		require.NoError(t, err, text)
		var ids []string
		for _, h := range hits {
			if h.Contact != (calendar.Contact{}) {
				assert.Equal(t, h.Booking.Booking, h.Contact.Booking, "a hit's contact is its booking's")
			}
			ids = append(ids, string(h.Booking.Booking))
		}
		return ids
	}
	assert.Equal(t, []string{"calendly-a1"}, found("LOVELACE"), "name, any case")
	assert.Equal(t, []string{"calendly-a10"}, found("grace@EXAMPLE"), "email, any case")
	assert.Equal(t, []string{"calendly-a1", "calendly-a10"}, found("calendly-a1"), "the exact id first, then the newest slot")
	assert.Equal(t, []string{"acuity-7", "calendly-a10", "calendly-a1"}, found("example.com"), "newest slot first")
	assert.Equal(t, []string{"acuity-7"}, found("_y%"), "wildcards are literal")
	assert.Empty(t, found("%%"))
	hits, err := e.rm.Search(ctx, "Ada", 0)
	require.NoError(t, err)
	require.Len(t, hits, 1)
	assert.Equal(t, calendar.StatusActive, hits[0].Booking.Status)
	assert.Equal(t, at(9, 0), hits[0].Booking.Start)

	for _, bad := range []string{"", "   ", "a\x00b", string(make([]byte, calendar.MaxSearchText+1))} {
		_, err := e.rm.Search(ctx, bad, 0)
		assert.ErrorIs(t, err, projections.ErrInvalidQuery, "%q", bad)
	}

	_, err = e.pool.Exec(ctx, `DELETE FROM contacts WHERE booking = 'calendly-a1'`) // what erasure does
	require.NoError(t, err)
	assert.Empty(t, found("Lovelace"))
	assert.Equal(t, []string{"calendly-a1", "calendly-a10"}, found("calendly-a1"))
	hits, err = e.rm.Search(ctx, "calendly-a1", 1)
	require.NoError(t, err)
	require.Len(t, hits, 1, "the limit")
	assert.Equal(t, calendar.Contact{}, hits[0].Contact, "no contact kept")
	cs, err = e.rm.Contacts(ctx, []booking.ID{"calendly-a1"})
	require.NoError(t, err)
	assert.Empty(t, cs)
}
