package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/postgres/checkpoint"
	bookingpkg "bookingledger/domain/booking"
	"bookingledger/domain/ledger"
)

// Contacts reads the invitees' addresses that personal.go saves (contacts, seat_contacts), for those
// who write to them: the process steps' workers (adapters/process declares ContactReader).
type Contacts struct{ pool *pgxpool.Pool }

// NewContacts returns the reader of the contacts on pool.
func NewContacts(pool *pgxpool.Pool) *Contacts { return &Contacts{pool: pool} }

// QueueContact queues the read of the booking's contact, or with seat, that seat's attendee (and
// nobody else's address), with the time zone the provider sent, on b, for a step's claim to send
// right after its COMMIT: the read a round trip of its own would make then, without one. Its outcome
// lands in into, found (false when none is known) and readErr as b runs — until then readErr says it
// was not answered — and its statements' callbacks never fail b (checkpoint.QueueIndexedRead). A read that failed
// leaves the connection in a failed transaction, and b's Close returns its error too: the caller, who
// knows what it sent before, rolls back and decides.
func (c *Contacts) QueueContact(b *pgx.Batch, booking, seat string, into *ledger.Contact, found *bool, readErr *error) {
	*into, *found, *readErr = ledger.Contact{}, false, fmt.Errorf("read contact of %s: %w", booking, checkpoint.ErrNotAnswered)
	sql := `SELECT email, name, time_zone FROM contacts WHERE booking = $1`
	args := []any{booking}
	if seat != "" {
		sql, args = `SELECT email, name, time_zone FROM seat_contacts WHERE booking = $1 AND seat = $2`, []any{booking, seat}
	}
	checkpoint.QueueIndexedRead(b, sql, args, func(br pgx.BatchResults) error {
		ct := ledger.Contact{Booking: bookingpkg.ID(booking), Seat: seat}
		err := br.QueryRow().Scan(&ct.Email, &ct.Name, &ct.TimeZone)
		if errors.Is(err, pgx.ErrNoRows) {
			*readErr = nil
			return nil
		}
		if err != nil {
			return fmt.Errorf("read contact of %s: %w", booking, err)
		}
		*into, *found, *readErr = ct, true, nil
		return nil
	}, readErr)
}

// Attendees returns the contacts of a seated booking's seats, keyed by seat: "" is the booking's own
// contact (a seat known only by number), any other key that seat's attendee; a seat without one is
// absent. One round trip whatever the number of seats, planned as QueueContact's read.
func (c *Contacts) Attendees(ctx context.Context, booking string, seats []string) (map[string]ledger.Contact, error) {
	out := map[string]ledger.Contact{}
	err := checkpoint.IndexedRead(ctx, c.pool, `SELECT '' AS seat, email, name, time_zone FROM contacts WHERE booking = $1 AND '' = ANY($2::text[])
UNION ALL
SELECT seat, email, name, time_zone FROM seat_contacts WHERE booking = $1 AND seat = ANY($2::text[])`, []any{booking, seats},
		func(rows pgx.Rows) error {
			for rows.Next() {
				ct := ledger.Contact{Booking: bookingpkg.ID(booking)}
				if err := rows.Scan(&ct.Seat, &ct.Email, &ct.Name, &ct.TimeZone); err != nil {
					return err
				}
				out[ct.Seat] = ct
			}
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("read attendees of %s: %w", booking, err)
	}
	return out, nil
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
