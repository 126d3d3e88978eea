package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

// receiptColumns are the columns every receipt insert writes, in the order receiptArgs gives them. The
// body is not a column of its own: bodyCTEs store it once per digest and the receipt references it, so
// that a replayed body is not stored again.
const receiptColumns = `provider, received_at, delivery_id, secret_ref, outcome, reason, bookings, streams, event_ids, event_types, body_digest, headers`

// insertReceiptSQL stores a receipt with the outcome as given: a delivery without appends (a
// redelivery whose events are all stored is one), or one whose events live in another store. It runs
// after lockSubjectsSQL took its body's subject ($20: the subjects, erasedCTE).
//
// A duplicate whose identical body (same provider, delivery id and digest) already has FoldAfter
// duplicate receipts received within FoldWindow ($18, $19: insertReceiptArgs) is not inserted: it
// folds into the newest of them, which counts it (repeats) and its time (last_received_at). A replayed
// signed body then adds no rows however often it comes, and the history still says how often it
// arrived; the first FoldAfter stay rows of their own, so ordinary retries look as they always did.
var insertReceiptSQL = `WITH d AS (
    SELECT $12::bytea AS digest
), recent AS (
    SELECT r.id FROM receipts r, d
    WHERE $5::text = 'duplicate' AND d.digest IS NOT NULL
      AND r.outcome = 'duplicate' AND r.provider = $1 AND r.delivery_id = $3 AND r.body_digest = d.digest
      AND r.received_at > $2::timestamptz - $18::interval
    ORDER BY r.id DESC LIMIT $19
), folded AS (
    UPDATE receipts SET repeats = repeats + 1, last_received_at = greatest(coalesce(last_received_at, received_at), $2)
    WHERE id = (SELECT max(id) FROM recent) AND (SELECT count(*) FROM recent) >= $19
    RETURNING id, outcome
), ` + erasedCTE("$20") + `, ` + bodyOfParamsCTE(11, "NOT EXISTS (SELECT 1 FROM folded)") + `, ` + bodyCTEs + `, inserted AS (
    INSERT INTO receipts (` + receiptColumns + `)
    SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, (SELECT body.digest FROM body), $17
    WHERE NOT EXISTS (SELECT 1 FROM folded)
    RETURNING id, outcome
)
SELECT id, outcome FROM inserted UNION ALL SELECT id, outcome FROM folded`

// Folding of identical duplicates (insertReceiptSQL): the first FoldAfter duplicate receipts of one
// body within FoldWindow are rows of their own, later ones count on the newest.
const (
	FoldAfter  = 100
	FoldWindow = time.Hour
)

// insertReceiptArgs are insertReceiptSQL's arguments, subjects those lockSubjectsSQL locked.
func insertReceiptArgs(r ledger.Receipt, body bodyRow, subjects []string) []any {
	return append(receiptArgs(r, body), FoldWindow, FoldAfter, nonNil(subjects))
}

// InsertReceipt stores a receipt on its own and returns its id. It is for stores whose events live
// elsewhere (EventStoreDB): the outcome is stored as given.
func (s *Store) InsertReceipt(ctx context.Context, r ledger.Receipt) (int64, error) {
	var (
		id      int64
		outcome string
	)
	body, err := s.bodyOf(r)
	if err != nil {
		return 0, fmt.Errorf("insert receipt %s: %w", r.DeliveryID, err)
	}
	subjects := body.subjects()
	batch := &pgx.Batch{}
	batch.Queue(lockSubjectsSQL, subjects)
	batch.Queue(insertReceiptSQL, insertReceiptArgs(r, body, subjects)...)
	br := s.pool.SendBatch(ctx, batch)
	_, err = br.Exec()
	if err == nil {
		err = br.QueryRow().Scan(&id, &outcome)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("insert receipt %s: %w", r.DeliveryID, translate(err))
	}
	return id, nil
}

// receiptArgs are a receipt's columns with body's arguments (bodyOfParamsCTE) in place of its digest.
func receiptArgs(r ledger.Receipt, body bodyRow) []any {
	n := len(r.Events)
	bookings, streams, types := make([]string, n), make([]string, n), make([]string, n)
	ids := make([][16]byte, n)
	for i, e := range r.Events {
		bookings[i], streams[i], ids[i], types[i] = string(e.Booking), e.Stream, e.ID, string(e.Type)
	}
	args := append([]any{r.Provider, r.ReceivedAt, r.DeliveryID, r.Secret, string(r.Outcome), r.Reason,
		bookings, streams, ids, types}, body.args()...)
	return append(args, ledger.HeaderLines(r.Headers))
}

// StoredReceipt is a receipt as stored.
type StoredReceipt struct {
	ID         int64
	Receipt    ledger.Receipt
	RecordedAt time.Time
	// Repeats is how many identical deliveries the receipt stands for (1 unless duplicates were folded
	// into it), received from Receipt.ReceivedAt to LastReceivedAt.
	Repeats        int
	LastReceivedAt time.Time
	// Body is the receipt's body as its reader may see it (Receipt.Body, opened when sealed): Erased
	// when its subject was erased (at ErasedAt, zero when only the missing key says so), Sealed when
	// it is encrypted and this store has no key to open it.
	Body ledger.BodyState
}

// storedReceiptColumns are the columns queryReceipts reads, in its order. The body is read here and nowhere
// else, so that how it is stored (issue #16: encrypted per subject) changes in one place.
const storedReceiptColumns = `id, provider, received_at, delivery_id, secret_ref, outcome, reason,
    bookings, streams, event_ids, event_types, receipt_body(body, body_digest), recorded_at, pending_booking,
    repeats, coalesce(last_received_at, received_at), headers, body_digest,
    receipt_body_erased_at(body, body_erased_at, body_digest)`

// ReceiptsForBooking returns every receipt that names bookingID, oldest first: through its events, or
// as the booking a deferred receipt waits for (pending_booking).
func (s *Store) ReceiptsForBooking(ctx context.Context, bookingID string) ([]StoredReceipt, error) {
	out, err := s.queryReceipts(ctx, `SELECT `+storedReceiptColumns+`
FROM receipts WHERE bookings @> ARRAY[$1::text] OR pending_booking = $1 ORDER BY id`, bookingID)
	if err != nil {
		return nil, fmt.Errorf("receipts of booking %s: %w", bookingID, err)
	}
	return out, nil
}

// ReceiptFilter selects receipts for operators; empty fields match everything.
type ReceiptFilter struct {
	Outcome  ledger.Outcome
	Provider string
	// BeforeID, when set, starts after the receipts up to it (the next page of a newest-first list).
	BeforeID int64
	// Limit bounds the rows returned, newest first (DefaultReceiptLimit when zero).
	Limit int
}

// DefaultReceiptLimit is ListReceipts' limit when the filter sets none.
const DefaultReceiptLimit = 100

// ListReceipts returns the receipts f selects, newest first.
func (s *Store) ListReceipts(ctx context.Context, f ReceiptFilter) ([]StoredReceipt, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultReceiptLimit
	}
	out, err := s.queryReceipts(ctx, listReceiptsSQL(f.Outcome), string(f.Outcome), f.Provider, limit, f.BeforeID)
	if err != nil {
		return nil, fmt.Errorf("list receipts: %w", err)
	}
	return out, nil
}

// listReceiptsSQL is ListReceipts' statement ($1 outcome, $2 provider, $3 limit, $4 before id). The
// quarantined outcome, the one operators list to act on, is written into the statement: a generic
// plan with a parameter for it could not use the partial index of the quarantined receipts (migration
// 0190) and would walk every receipt's id, newest first, for the few it wants.
func listReceiptsSQL(outcome ledger.Outcome) string {
	where := `($1 = '' OR outcome = $1)`
	if outcome == ledger.OutcomeQuarantined {
		where = `$1 = '` + string(ledger.OutcomeQuarantined) + `' AND outcome = '` + string(ledger.OutcomeQuarantined) + `'`
	}
	return `SELECT ` + storedReceiptColumns + `
FROM receipts WHERE ` + where + ` AND ($2 = '' OR provider = $2) AND ($4 = 0 OR id < $4) ORDER BY id DESC LIMIT $3`
}

// ReceiptAndRelated returns receipt id and the other receipts of the same delivery (same provider and
// delivery id: the deferred receipt and the one that finished it, the copies of a redelivery), oldest
// first; found is false when there is no receipt id.
func (s *Store) ReceiptAndRelated(ctx context.Context, id int64) (r StoredReceipt, related []StoredReceipt, found bool, err error) {
	rs, err := s.queryReceipts(ctx, `SELECT `+storedReceiptColumns+` FROM receipts WHERE id = $1`, id)
	if err != nil || len(rs) == 0 {
		return StoredReceipt{}, nil, false, wrapIf(err, "receipt %d", id)
	}
	r = rs[0]
	if r.Receipt.DeliveryID == "" {
		return r, []StoredReceipt{}, true, nil // rejected requests have no identity to relate by
	}
	related, err = s.queryReceipts(ctx, `SELECT `+storedReceiptColumns+`
FROM receipts WHERE delivery_id = $1 AND provider = $2 AND id <> $3 ORDER BY id LIMIT $4`,
		r.Receipt.DeliveryID, r.Receipt.Provider, id, DefaultReceiptLimit)
	if err != nil {
		return StoredReceipt{}, nil, false, wrapIf(err, "receipts related to %d", id)
	}
	return r, related, true, nil
}

func wrapIf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// queryReceipts runs a SELECT of storedReceiptColumns and scans its rows.
func (s *Store) queryReceipts(ctx context.Context, sql string, args ...any) ([]StoredReceipt, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, translate(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (sr StoredReceipt, err error) {
		var (
			bookings, streams, types []string
			ids                      [][16]byte
			pending                  string
			headers                  []string
			digest                   []byte
			erasedAt                 *time.Time
		)
		r := &sr.Receipt
		if err := row.Scan(&sr.ID, &r.Provider, &r.ReceivedAt, &r.DeliveryID, &r.Secret, &r.Outcome, &r.Reason,
			&bookings, &streams, &ids, &types, &r.Body, &sr.RecordedAt, &pending, &sr.Repeats, &sr.LastReceivedAt, &headers, &digest, &erasedAt); err != nil {
			return sr, err
		}
		r.Headers = ledger.HeadersFromLines(headers)
		if err := s.openBody(ctx, &sr, digest, erasedAt); err != nil {
			return sr, fmt.Errorf("receipt %d: %w", sr.ID, err)
		}
		r.Booking = booking.ID(pending)
		r.Events = make([]ledger.EventRef, len(ids))
		for i := range ids {
			r.Events[i] = ledger.EventRef{Booking: booking.ID(bookings[i]), Stream: streams[i],
				ID: eventlog.EventID(ids[i]), Type: booking.EventType(types[i])}
		}
		return sr, nil
	})
	if err != nil {
		return nil, translate(err)
	}
	return out, nil
}
