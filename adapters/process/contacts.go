package process

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/providers"
)

// Contacts keeps invitees' addresses, keyed by booking, outside the event log: erasing a person is
// Erase (deleting the row); events, which are never rewritten, never held the address.
type Contacts struct{ pool *pgxpool.Pool }

// NewContacts returns the contacts table on pool.
func NewContacts(pool *pgxpool.Pool) *Contacts { return &Contacts{pool: pool} }

// SaveContacts stores (or refreshes) each booking's contact. Called by the ingress before it records
// the delivery, so that a booking's contact exists whenever its events do.
func (c *Contacts) SaveContacts(ctx context.Context, contacts []providers.Contact) error {
	for _, ct := range contacts {
		// Not for an erased booking (bl_subject_erased, migration 0131, waits for an erasure under way).
		if _, err := c.pool.Exec(ctx, `INSERT INTO contacts (booking, email, name) SELECT $1, $2, $3 WHERE NOT bl_subject_erased($1)
ON CONFLICT (booking) DO UPDATE SET email = EXCLUDED.email, name = EXCLUDED.name, updated_at = now()
WHERE contacts.email <> EXCLUDED.email OR contacts.name <> EXCLUDED.name`, string(ct.Booking), ct.Email, ct.Name); err != nil {
			return fmt.Errorf("save contact of %s: %w", ct.Booking, err)
		}
	}
	return nil
}

// Erase deletes the booking's contact: later email steps of the booking fail with "no invitee email".
func (c *Contacts) Erase(ctx context.Context, booking string) (bool, error) {
	tag, err := c.pool.Exec(ctx, `DELETE FROM contacts WHERE booking = $1`, booking)
	if err != nil {
		return false, fmt.Errorf("erase contact of %s: %w", booking, err)
	}
	return tag.RowsAffected() > 0, nil
}
