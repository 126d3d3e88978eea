package readmodel

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"bookingledger/projections"
	"bookingledger/projections/calendar"
)

// A process step's reconciliation item is opened with the step's outcome and closed with an
// operator's resolution of the step, in the transaction of the step's owner
// (adapters/postgres/stepstore): these are the queue's part of it, each in the caller's tx.

// OpenItem opens an item of kind on subject in tx, unless one is open already.
func OpenItem(ctx context.Context, tx pgx.Tx, kind, subject, booking, reason string) error {
	_, err := tx.Exec(ctx, `INSERT INTO reconciliation_items (kind, subject, booking, reason) VALUES ($1, $2, $3, $4)
ON CONFLICT (kind, subject) WHERE closed_at IS NULL DO NOTHING`, kind, subject, booking, reason)
	if err != nil {
		return fmt.Errorf("open %s item: %w", kind, err)
	}
	return nil
}

// LockItem reads item id's kind and subject, and whether it is closed, locked until tx ends. An
// error wraps projections.ErrNotFound when there is no such item.
func LockItem(ctx context.Context, tx pgx.Tx, id int64) (kind, subject string, closed bool, err error) {
	err = tx.QueryRow(ctx, `SELECT kind, subject, closed_at IS NOT NULL FROM reconciliation_items WHERE id = $1 FOR UPDATE`, id).Scan(&kind, &subject, &closed)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", false, fmt.Errorf("item %d: %w", id, projections.ErrNotFound)
	}
	return kind, subject, closed, err
}

// CloseItem closes item id as an operator's resolution with note, by names the operator, in tx.
func CloseItem(ctx context.Context, tx pgx.Tx, id int64, note, by string) (calendar.Item, error) {
	items, err := queryItems(ctx, tx, `UPDATE reconciliation_items SET closed_at = now(), closed_by = 'operator', note = $2, resolved_by = $3
WHERE id = $1 RETURNING `+itemColumns, id, note, by)
	if err == nil && len(items) != 1 {
		err = projections.ErrNotFound
	}
	if err != nil {
		return calendar.Item{}, fmt.Errorf("close item %d: %w", id, err)
	}
	return items[0], nil
}
