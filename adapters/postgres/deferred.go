package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"bookingledger/domain/ledger"
)

// insertDeferredSQL stores a deferred receipt: a verified delivery with its body and no events yet.
// The body is stored once per digest (bodyCTEs), like every receipt's, after lockSubjectsSQL took its
// subject's erasure lock ($14: the subjects, erasedCTE).
var insertDeferredSQL = `WITH ` + erasedCTE("$14") + `, ` + bodyOfParamsCTE(8, "true") + `, ` + bodyCTEs + `
INSERT INTO receipts (provider, received_at, delivery_id, secret_ref, outcome, reason, body_digest, pending_booking, headers)
VALUES ($1, $2, $3, $4, 'deferred', $5, (SELECT body.digest FROM body), $6, $7)
RETURNING id`

// InsertDeferred stores r as a deferred receipt in tx (adapters/jobs' Defer: the receipt and its job
// commit together), its body sealed as the ledger's are, and returns its id. r.Booking is the booking
// it waits for.
func (s *Store) InsertDeferred(ctx context.Context, tx pgx.Tx, r ledger.Receipt) (int64, error) {
	body, err := prepareBody(s.sealer, ReceiptSubject(r), r.Body)
	if err != nil {
		return 0, fmt.Errorf("deferred receipt %s: %w", r.DeliveryID, err)
	}
	subjects := body.subjects()
	if _, err := tx.Exec(ctx, lockSubjectsSQL, subjects); err != nil {
		return 0, fmt.Errorf("deferred receipt %s: lock its subject: %w", r.DeliveryID, translate(err))
	}
	var id int64
	args := append([]any{r.Provider, r.ReceivedAt, r.DeliveryID, r.Secret, r.Reason, string(r.Booking), ledger.HeaderLines(r.Headers)},
		body.args()...)
	if err := tx.QueryRow(ctx, insertDeferredSQL, append(args, subjects)...).Scan(&id); err != nil {
		return 0, fmt.Errorf("deferred receipt %s: %w", r.DeliveryID, translate(err))
	}
	return id, nil
}

// MarkDuplicate turns receipt id into a duplicate with reason, in tx (a deferral another deferral's
// job covers).
func (s *Store) MarkDuplicate(ctx context.Context, tx pgx.Tx, id int64, reason string) error {
	if _, err := tx.Exec(ctx, `UPDATE receipts SET outcome = 'duplicate', reason = $2 WHERE id = $1`, id, reason); err != nil {
		return fmt.Errorf("mark receipt %d duplicate: %w", id, translate(err))
	}
	return nil
}

// Receipt reads receipt id back, its body opened (nil when erased or sealed without a sealer here);
// an error wrapping pgx.ErrNoRows when there is no such receipt.
func (s *Store) Receipt(ctx context.Context, id int64) (ledger.Receipt, error) {
	rs, err := s.queryReceipts(ctx, `SELECT `+storedReceiptColumns+` FROM receipts WHERE id = $1`, id)
	if err != nil {
		return ledger.Receipt{}, fmt.Errorf("receipt %d: %w", id, err)
	}
	if len(rs) == 0 {
		return ledger.Receipt{}, fmt.Errorf("receipt %d: %w", id, pgx.ErrNoRows)
	}
	return rs[0].Receipt, nil
}
