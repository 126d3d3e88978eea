package readmodel

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
)

// Contacts returns the invitees of ids that the contacts table holds (postgres.personal.go saves them
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
	rows, err := m.pool.Query(ctx, `SELECT booking, name, email FROM contacts WHERE booking = ANY($1)`, keys)
	if err != nil {
		return nil, fmt.Errorf("contacts: %w", err)
	}
	cs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (c calendar.Contact, err error) {
		err = r.Scan(&c.Booking, &c.Name, &c.Email)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("contacts: %w", err)
	}
	for _, c := range cs {
		out[c.Booking] = c
	}
	return out, nil
}

// searchSQL finds bookings by id (exact, or a part of it) or by a part of the invitee's name or email
// address, case-insensitively: $1 the text, $2 it as a LIKE pattern, $3 the limit. The exact id first,
// then the newest slot. It scans the contacts and the calendar rows (there is no trigram index): an
// operator's search, not an API for machines.
const searchSQL = `SELECT b.booking, coalesce(c.name, ''), coalesce(c.email, '')
FROM calendar_bookings b LEFT JOIN contacts c ON c.booking = b.booking
WHERE b.booking = $1 OR b.booking ILIKE $2 OR c.email ILIKE $2 OR c.name ILIKE $2
ORDER BY (b.booking = $1) DESC, lower(b.during) DESC, b.booking
LIMIT $3`

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
	rows, err := m.pool.Query(ctx, searchSQL, text, pattern, limit)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (c calendar.Contact, err error) {
		err = r.Scan(&c.Booking, &c.Name, &c.Email)
		return c, err
	})
	if err != nil || len(found) == 0 {
		if err != nil {
			err = fmt.Errorf("search: %w", err)
		}
		return nil, err
	}
	ids := make([]string, len(found))
	for i, c := range found {
		ids[i] = string(c.Booking)
	}
	bs, err := queryRows(ctx, m.pool, scanBooking, `SELECT `+bookingColumns+` FROM calendar_bookings WHERE booking = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	byID := make(map[booking.ID]calendar.Booking, len(bs))
	for _, b := range bs {
		byID[b.Booking] = b
	}
	out := make([]calendar.SearchHit, 0, len(found))
	for _, c := range found {
		b, ok := byID[c.Booking]
		if !ok {
			continue // gone between the two reads (a rebuild swapped the tables)
		}
		if c.Name == "" && c.Email == "" {
			c = calendar.Contact{}
		}
		out = append(out, calendar.SearchHit{Booking: b, Contact: c})
	}
	return out, nil
}
