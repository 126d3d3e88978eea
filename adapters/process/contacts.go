package process

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Contacts keeps invitees' addresses, keyed by booking, outside the event log: erasing a person is
// Erase (deleting the row); events, which are never rewritten, never held the address. The ledger's
// commit writes them, with the delivery's events (ledger.Commit.Personal).
type Contacts struct{ pool *pgxpool.Pool }

// NewContacts returns the contacts table on pool.
func NewContacts(pool *pgxpool.Pool) *Contacts { return &Contacts{pool: pool} }

// Erase deletes the booking's contact: later email steps of the booking fail with "no invitee email".
func (c *Contacts) Erase(ctx context.Context, booking string) (bool, error) {
	tag, err := c.pool.Exec(ctx, `DELETE FROM contacts WHERE booking = $1`, booking)
	if err != nil {
		return false, fmt.Errorf("erase contact of %s: %w", booking, err)
	}
	return tag.RowsAffected() > 0, nil
}
