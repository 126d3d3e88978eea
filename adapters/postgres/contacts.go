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

// Contact returns the booking's contact, or with seat, that seat's attendee (and nobody else's
// address), with the time zone the provider sent; ok is false when none is known.
func (c *Contacts) Contact(ctx context.Context, booking, seat string) (ct ledger.Contact, ok bool, err error) {
	sql, args := contactQuery(booking, seat)
	ct, ok, err = scanContact(c.pool.QueryRow(ctx, sql, args...), booking, seat)
	if err != nil {
		return ledger.Contact{}, false, fmt.Errorf("read contact of %s: %w", booking, err)
	}
	return ct, ok, nil
}

// QueueContact queues Contact's read on b, for a step's claim to send right after its COMMIT: what
// Contact would read then, without a round trip of its own. The read is a read-only transaction of
// its own under checkpoint.IndexedPlanning: a connection that planned it while contacts was a page
// would otherwise keep scanning the whole table as it grows. Its outcome lands in into, found and
// readErr as b runs — until then readErr says it was not answered — and its statements' callbacks
// never fail b. A read that failed leaves the connection in a failed transaction, and b's Close
// returns its error too: the caller, who knows what it sent before, rolls back and decides.
func (c *Contacts) QueueContact(b *pgx.Batch, booking, seat string, into *ledger.Contact, found *bool, readErr *error) {
	*into, *found, *readErr = ledger.Contact{}, false, fmt.Errorf("read contact of %s: %w", booking, errNotAnswered)
	exec := func(sql string) {
		// A failed BEGIN or SET fails the read after it, which says so.
		b.Queue(sql).Fn = func(br pgx.BatchResults) error { _, _ = br.Exec(); return nil }
	}
	exec("BEGIN READ ONLY")
	for _, set := range checkpoint.IndexedPlanning {
		exec("SET LOCAL " + set)
	}
	// Its own text, so that its own prepared statement keeps the plan made under those settings (a
	// connection's cached plan does not follow the settings in force when it runs).
	sql, args := contactQuery(booking, seat)
	b.Queue(sql+" -- indexed", args...).Fn = func(br pgx.BatchResults) error {
		ct, ok, err := scanContact(br.QueryRow(), booking, seat)
		if err != nil {
			*readErr = fmt.Errorf("read contact of %s: %w", booking, err)
			return nil
		}
		*into, *found, *readErr = ct, ok, nil
		return nil
	}
	exec("COMMIT")
}

// errNotAnswered: a queued read whose batch never reached it.
var errNotAnswered = errors.New("the read was not answered")

func contactQuery(booking, seat string) (string, []any) {
	if seat == "" {
		return `SELECT email, name, time_zone FROM contacts WHERE booking = $1`, []any{booking}
	}
	return `SELECT email, name, time_zone FROM seat_contacts WHERE booking = $1 AND seat = $2`, []any{booking, seat}
}

func scanContact(row pgx.Row, booking, seat string) (ct ledger.Contact, ok bool, err error) {
	ct.Booking, ct.Seat = bookingpkg.ID(booking), seat
	err = row.Scan(&ct.Email, &ct.Name, &ct.TimeZone)
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.Contact{}, false, nil
	}
	if err != nil {
		return ledger.Contact{}, false, err
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
