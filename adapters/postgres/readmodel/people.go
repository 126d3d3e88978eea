package readmodel

import (
	"context"
	"fmt"
	"strings"

	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
)

// Contacts returns the invitees of ids that the contacts table holds (adapters/postgres saves them
// with their deliveries; erasure deletes them), by booking. A booking without a row is absent.
func (m *ReadModel) Contacts(ctx context.Context, ids []booking.ID) (map[booking.ID]calendar.Contact, error) {
	out := map[booking.ID]calendar.Contact{}
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = string(id)
	}
	cs, err := m.contacts.Invitees(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("contacts: %w", err)
	}
	for _, c := range cs {
		out[c.Booking] = calendar.Contact{Booking: c.Booking, Name: c.Name, Email: c.Email}
	}
	return out, nil
}

// searchSQL finds the calendar's bookings by id (exact, or a part of it) or among $3, the bookings
// whose invitee's name or email address matched: $1 the text, $2 it as a LIKE pattern, $4 the limit.
// The exact id first, then the newest slot. It scans the calendar rows (there is no trigram index):
// an operator's search, not an API for machines.
const searchSQL = `SELECT ` + bookingColumns + ` FROM calendar_bookings
WHERE booking = $1 OR booking ILIKE $2 OR booking = ANY($3)
ORDER BY (booking = $1) DESC, lower(during) DESC, booking
LIMIT $4`

// Search returns up to limit bookings (at most calendar.MaxSearch) whose id is text or contains
// it, or whose invitee's name or email address contains it, with their contacts.
func (m *ReadModel) Search(ctx context.Context, text string, limit int) ([]calendar.SearchHit, error) {
	text = strings.TrimSpace(text)
	if text == "" || len(text) > calendar.MaxSearchText || !ledger.Storable(text) {
		return nil, fmt.Errorf("%w: search text must be 1 to %d bytes of UTF-8 without NUL", projections.ErrInvalidQuery, calendar.MaxSearchText)
	}
	if limit <= 0 || limit > calendar.MaxSearch {
		limit = calendar.MaxSearch
	}
	pattern := "%" + strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(text) + "%"
	byContact, err := m.contacts.BookingsMatching(ctx, pattern)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	bs, err := queryRows(ctx, m.pool, scanBooking, searchSQL, text, pattern, byContact, limit)
	if err != nil || len(bs) == 0 {
		if err != nil {
			err = fmt.Errorf("search: %w", err)
		}
		return nil, err
	}
	ids := make([]booking.ID, len(bs))
	for i, b := range bs {
		ids[i] = b.Booking
	}
	contacts, err := m.Contacts(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	out := make([]calendar.SearchHit, len(bs))
	for i, b := range bs {
		c := contacts[b.Booking]
		if c.Name == "" && c.Email == "" {
			c = calendar.Contact{}
		}
		out[i] = calendar.SearchHit{Booking: b, Contact: c}
	}
	return out, nil
}
