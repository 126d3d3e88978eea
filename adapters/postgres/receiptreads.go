package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	bookingpkg "bookingledger/domain/booking"
)

// Reads of the receipts for the packages that keep something about them in tables of their own: the
// quarantined receipts adapters/postgres/readmodel opens reconciliation items for, and a provider's
// last webhook delivery that adapters/providersync shows and records.

// QuarantinedReceipt is a quarantined receipt as its reconciliation item names it.
type QuarantinedReceipt struct {
	ID         int64
	Provider   string
	DeliveryID string
	Reason     string
	// Booking is the first booking the receipt names; "" when it names none.
	Booking bookingpkg.ID
}

// quarantinedExceptSQL selects the quarantined receipts (their partial index) whose id is not in $1:
// an anti-join against the array, hashed, so a long list is read once.
const quarantinedExceptSQL = `
FROM receipts r WHERE r.outcome = 'quarantined'
  AND NOT EXISTS (SELECT 1 FROM unnest($1::bigint[]) AS x(id) WHERE x.id = r.id)`

// QuarantinedReceipts returns the quarantined receipts whose ids are not in except, by id, in tx.
func (s *Store) QuarantinedReceipts(ctx context.Context, tx pgx.Tx, except []int64) ([]QuarantinedReceipt, error) {
	rows, err := tx.Query(ctx, `SELECT r.id, r.provider, r.delivery_id, r.reason, coalesce(r.bookings[1], '')`+quarantinedExceptSQL+` ORDER BY r.id`, except)
	if err != nil {
		return nil, fmt.Errorf("quarantined receipts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (q QuarantinedReceipt, err error) {
		err = r.Scan(&q.ID, &q.Provider, &q.DeliveryID, &q.Reason, &q.Booking)
		return q, err
	})
	if err != nil {
		return nil, fmt.Errorf("quarantined receipts: %w", err)
	}
	return out, nil
}

// CountQuarantinedExcept returns how many quarantined receipts have an id not in except, in tx.
func (s *Store) CountQuarantinedExcept(ctx context.Context, tx pgx.Tx, except []int64) (int64, error) {
	var n int64
	if err := tx.QueryRow(ctx, `SELECT count(*)`+quarantinedExceptSQL, except).Scan(&n); err != nil {
		return 0, fmt.Errorf("count quarantined receipts: %w", err)
	}
	return n, nil
}

// lastDeliveryWindow bounds the scan for a provider's last webhook delivery: the newest receipts only,
// by the primary key, so that a provider that never delivers costs a bounded read.
const lastDeliveryWindow = 200_000

// LastWebhookDelivery returns when provider's newest verified webhook delivery (not a sync's receipt)
// arrived, when one is among the newest 200,000 receipts; ok is false when none is.
func (s *Store) LastWebhookDelivery(ctx context.Context, provider string) (at time.Time, ok bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT received_at FROM receipts
  WHERE id > (SELECT coalesce(max(id), 0) FROM receipts) - $2
    AND provider = $1 AND outcome <> 'rejected' AND delivery_id NOT LIKE 'sync:%'
  ORDER BY id DESC LIMIT 1`, provider, lastDeliveryWindow).Scan(&at)
	switch {
	case err == nil:
		return at, true, nil
	case errors.Is(err, pgx.ErrNoRows):
		return time.Time{}, false, nil
	}
	return time.Time{}, false, fmt.Errorf("last webhook delivery of %s: %w", provider, err)
}
