package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	bookingpkg "bookingledger/domain/booking"
	"bookingledger/domain/ledger"
)

// Contacts reads the invitees' addresses that personal.go saves (contacts, seat_contacts), for those
// who write to them: the process steps' workers (adapters/process declares ContactReader).
type Contacts struct{ pool *pgxpool.Pool }

// NewContacts returns the reader of the contacts on pool.
func NewContacts(pool *pgxpool.Pool) *Contacts { return &Contacts{pool: pool} }

// Contact returns the booking's contact, or with seat, that seat's attendee (and nobody else's
// address), with the time zone the provider sent; ok is false when none is known.
func (c *Contacts) Contact(ctx context.Context, booking, seat string) (ct ledger.Contact, ok bool, err error) {
	ct.Booking, ct.Seat = bookingpkg.ID(booking), seat
	if seat == "" {
		err = c.pool.QueryRow(ctx, `SELECT email, name, time_zone FROM contacts WHERE booking = $1`, booking).Scan(&ct.Email, &ct.Name, &ct.TimeZone)
	} else {
		err = c.pool.QueryRow(ctx, `SELECT email, name, time_zone FROM seat_contacts WHERE booking = $1 AND seat = $2`, booking, seat).Scan(&ct.Email, &ct.Name, &ct.TimeZone)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Contact{}, false, nil
	}
	if err != nil {
		return ledger.Contact{}, false, fmt.Errorf("read contact of %s: %w", booking, err)
	}
	return ct, true, nil
}

// SeatsOfContact returns those of seats whose attendee has the booking's contact's address (case
// aside), in tx.
func (c *Contacts) SeatsOfContact(ctx context.Context, tx pgx.Tx, booking string, seats []string) ([]string, error) {
	r, err := tx.Query(ctx, `SELECT sc.seat FROM seat_contacts sc
JOIN contacts c ON c.booking = sc.booking AND lower(c.email) = lower(sc.email)
WHERE sc.booking = $1 AND sc.seat = ANY($2)`, booking, seats)
	if err != nil {
		return nil, fmt.Errorf("read seat contacts of %s: %w", booking, err)
	}
	return pgx.CollectRows(r, pgx.RowTo[string])
}

// Invitees returns the contacts of those of bookings that have one (the booking's own invitee, not
// its seats' attendees), for the read model's people of a booking.
func (c *Contacts) Invitees(ctx context.Context, bookings []string) ([]ledger.Contact, error) {
	rows, err := c.pool.Query(ctx, `SELECT booking, name, email, time_zone FROM contacts WHERE booking = ANY($1)`, bookings)
	if err != nil {
		return nil, fmt.Errorf("read contacts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ct ledger.Contact, err error) {
		err = r.Scan(&ct.Booking, &ct.Name, &ct.Email, &ct.TimeZone)
		return ct, err
	})
	if err != nil {
		return nil, fmt.Errorf("read contacts: %w", err)
	}
	return out, nil
}

// BookingsMatching returns the bookings whose invitee's name or email address matches the ILIKE
// pattern, for the read model's search. It scans the contacts (there is no trigram index): an
// operator's search, not an API for machines.
func (c *Contacts) BookingsMatching(ctx context.Context, pattern string) ([]string, error) {
	rows, err := c.pool.Query(ctx, `SELECT booking FROM contacts WHERE email ILIKE $1 OR name ILIKE $1`, pattern)
	if err != nil {
		return nil, fmt.Errorf("search contacts: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("search contacts: %w", err)
	}
	return out, nil
}
