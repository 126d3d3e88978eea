package readmodel

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/projections/calendar"
)

// Items opens and closes the reconciliation items other packages raise under subjects of their own
// (the provider sync's "<provider> sync" and "<provider> subscription"): this package owns
// reconciliation_items, and they go through it.
type Items struct{ pool *pgxpool.Pool }

// NewItems returns the items on pool.
func NewItems(pool *pgxpool.Pool) *Items { return &Items{pool: pool} }

// Raise opens the item of kind and subject with reason, or gives the open one reason; opened reports
// whether the item is new.
func (x *Items) Raise(ctx context.Context, kind calendar.ItemKind, subject, reason string) (opened bool, err error) {
	err = x.pool.QueryRow(ctx, `INSERT INTO reconciliation_items (kind, subject, reason) VALUES ($1, $2, $3)
ON CONFLICT (kind, subject) WHERE closed_at IS NULL DO UPDATE SET reason = excluded.reason
RETURNING xmax = 0`, string(kind), subject, reason).Scan(&opened)
	return opened, err
}

// CloseAuto closes the open item of kind and subject, automatically, with note; when none is open it
// does nothing.
func (x *Items) CloseAuto(ctx context.Context, kind calendar.ItemKind, subject, note string) error {
	_, err := x.pool.Exec(ctx, `UPDATE reconciliation_items SET closed_at = now(), closed_by = $3, note = $4
WHERE kind = $1 AND subject = $2 AND closed_at IS NULL`, string(kind), subject, calendar.ClosedByAuto, note)
	return err
}
