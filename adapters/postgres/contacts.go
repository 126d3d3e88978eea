package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Contacts reads the invitees' addresses that personal.go saves (contacts, seat_contacts), for those
// who write to them: the process steps' workers (adapters/process declares ContactReader).
type Contacts struct{ pool *pgxpool.Pool }

// NewContacts returns the reader of the contacts on pool.
func NewContacts(pool *pgxpool.Pool) *Contacts { return &Contacts{pool: pool} }

// Contact returns the booking's contact, or with seat, that seat's attendee (and nobody else's
// address); ok is false when none is known.
func (c *Contacts) Contact(ctx context.Context, booking, seat string) (email, name string, ok bool, err error) {
	if seat == "" {
		err = c.pool.QueryRow(ctx, `SELECT email, name FROM contacts WHERE booking = $1`, booking).Scan(&email, &name)
	} else {
		err = c.pool.QueryRow(ctx, `SELECT email, name FROM seat_contacts WHERE booking = $1 AND seat = $2`, booking, seat).Scan(&email, &name)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, fmt.Errorf("read contact of %s: %w", booking, err)
	}
	return email, name, true, nil
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
