package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The receipts' and contacts' parts of an erasure and of retention (adapters/privacy), each in the
// caller's transaction: this package owns receipts, receipt_bodies, contacts and seat_contacts. An
// erased body is replaced by its tombstone (ErasedForm) and marked by its erased_at (migration 0600).

// EraseReceiptBodies erases every body stored for a receipt of subjects, sealed or stored before
// sealing began, shared (receipt_bodies) or inline (receipts stored before migration 0031), as erased
// at at. It returns how many of each it erased (bodies erased before are not counted again).
func (s *Store) EraseReceiptBodies(ctx context.Context, tx pgx.Tx, subjects []string, at time.Time) (shared, inline int64, err error) {
	// The two ways to find the shared bodies are a union: as an OR, the plan reads every body.
	tag, err := tx.Exec(ctx, `UPDATE receipt_bodies b SET body = $2, key_id = NULL, erased_at = $3
WHERE b.digest IN (SELECT digest FROM receipt_bodies WHERE subject = ANY($1)
    UNION ALL SELECT r.body_digest FROM receipts r WHERE r.body_digest IS NOT NULL AND (r.bookings && $1 OR r.pending_booking = ANY($1)))
  AND b.erased_at IS NULL`, subjects, ErasedForm(at), at)
	if err != nil {
		return 0, 0, fmt.Errorf("erase receipt bodies: %w", err)
	}
	shared = tag.RowsAffected()
	tag, err = tx.Exec(ctx, `UPDATE receipts SET body = $2, body_erased_at = $3 WHERE body IS NOT NULL AND (bookings && $1 OR pending_booking = ANY($1))
  AND body_erased_at IS NULL`, subjects, ErasedForm(at), at)
	if err != nil {
		return shared, 0, fmt.Errorf("erase inline receipt bodies: %w", err)
	}
	return shared, tag.RowsAffected(), nil
}

// ShredReceiptBodies erases up to limit shared bodies first stored before cutoff, oldest first, as
// erased at at, skipping rows other transactions hold. It returns how many it erased and their
// subjects. The bodies are found by the partial index of those not shredded (its predicate is in the
// query, or the planner cannot use it; a body with a subject and no data key is a tombstone).
func (s *Store) ShredReceiptBodies(ctx context.Context, tx pgx.Tx, cutoff, at time.Time, limit int) (int64, []string, error) {
	var (
		n        int64
		subjects []string
	)
	err := tx.QueryRow(ctx, `WITH s AS (
    UPDATE receipt_bodies SET body = $2, key_id = NULL, erased_at = $4 WHERE digest IN (
        SELECT digest FROM receipt_bodies WHERE stored_at < $1 AND (key_id IS NOT NULL OR subject IS NULL)
            AND erased_at IS NULL
        ORDER BY stored_at LIMIT $3 FOR UPDATE SKIP LOCKED)
    RETURNING subject)
SELECT count(*), coalesce(array_agg(DISTINCT subject) FILTER (WHERE subject IS NOT NULL), '{}') FROM s`, cutoff, ErasedForm(at), limit, at).Scan(&n, &subjects)
	if err != nil {
		return 0, nil, fmt.Errorf("shred bodies: %w", err)
	}
	return n, subjects, nil
}

// SealingKeys returns the data keys that seal a stored body of the subjects, each with its subject
// (retention keeps those keys and deletes the others of the subjects, adapters/privacy), in tx.
func (s *Store) SealingKeys(ctx context.Context, tx pgx.Tx, subjects []string) (keySubjects []string, keys [][16]byte, err error) {
	keySubjects, keys = []string{}, [][16]byte{} // empty, not NULL, when there are none
	rows, err := tx.Query(ctx, `SELECT DISTINCT subject, key_id FROM receipt_bodies WHERE subject = ANY($1) AND key_id IS NOT NULL`, subjects)
	if err == nil {
		var subject string
		var key [16]byte
		_, err = pgx.ForEachRow(rows, []any{&subject, &key}, func() error {
			keySubjects, keys = append(keySubjects, subject), append(keys, key)
			return nil
		})
	}
	if err != nil {
		return nil, nil, fmt.Errorf("sealing keys: %w", err)
	}
	return keySubjects, keys, nil
}

// ShredInlineReceiptBodies erases up to limit inline bodies of receipts received before cutoff, in id
// order after receipt after, as erased at at. It returns how many it erased and the last receipt's id
// (after when none).
func (s *Store) ShredInlineReceiptBodies(ctx context.Context, tx pgx.Tx, cutoff, at time.Time, after int64, limit int) (int64, int64, error) {
	var n int64
	err := tx.QueryRow(ctx, `WITH s AS (
    UPDATE receipts SET body = $2, body_erased_at = $5 WHERE id IN (
        SELECT id FROM receipts WHERE id > $4 AND body IS NOT NULL AND received_at < $1 AND body_erased_at IS NULL
        ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED)
    RETURNING id)
SELECT count(*), coalesce(max(id), $4) FROM s`, cutoff, ErasedForm(at), limit, after, at).Scan(&n, &after)
	if err != nil {
		return 0, after, fmt.Errorf("shred inline bodies: %w", err)
	}
	return n, after, nil
}

// BookingsWithEmail returns, in tx, every booking whose contact (or a seat's contact: a seated
// booking's attendees are its subjects too) has the address, case-insensitive, spaces around it
// ignored.
func (s *Store) BookingsWithEmail(ctx context.Context, tx pgx.Tx, email string) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT booking FROM contacts WHERE lower(email) = lower($1)
UNION SELECT booking FROM seat_contacts WHERE lower(email) = lower($1) ORDER BY booking`, strings.TrimSpace(email))
	if err != nil {
		return nil, fmt.Errorf("find bookings: %w", err)
	}
	bookings, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("find bookings: %w", err)
	}
	return bookings, nil
}

// EraseContacts deletes the subjects' contacts and their seats' attendees' contacts in tx, and
// returns how many.
func (s *Store) EraseContacts(ctx context.Context, tx pgx.Tx, subjects []string) (int64, error) {
	var n int64
	for _, table := range []string{"contacts", "seat_contacts"} {
		tag, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE booking = ANY($1)`, subjects)
		if err != nil {
			return n, fmt.Errorf("erase %s: %w", table, err)
		}
		n += tag.RowsAffected()
	}
	return n, nil
}
