package readmodel

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// EraseCancelReasons is calendar_bookings' part of an erasure (adapters/privacy), in its transaction:
// events recorded before free text was kept apart carry their cancel reason, and so does the row
// folded from them. It returns how many rows it scrubbed.
func EraseCancelReasons(ctx context.Context, tx pgx.Tx, subjects []string) (int64, error) {
	tag, err := tx.Exec(ctx, `UPDATE calendar_bookings SET cancel_reason = '' WHERE booking = ANY($1) AND cancel_reason <> ''`, subjects)
	if err != nil {
		return 0, fmt.Errorf("scrub erased subjects' calendar rows: %w", err)
	}
	return tag.RowsAffected(), nil
}
