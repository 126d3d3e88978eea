package postgres

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

// insertReceiptSQL stores a receipt. $11 lists the event IDs the same transaction appended (NULL: the
// events live in another store, keep the outcome as given). A receipt committed as accepted becomes
// duplicate when the transaction wrote none of the events it appends (a receipt-only commit stays as
// it is), i.e. when every append came back as an idempotent
// re-append because a concurrent copy of the delivery won. Deciding it here, inside the transaction, is
// what keeps the stored outcome true under that race.
const insertReceiptSQL = `INSERT INTO receipts
    (provider, received_at, delivery_id, secret_ref, outcome, reason, bookings, streams, event_ids, event_types, body)
VALUES ($1, $2, $3, $4,
    CASE WHEN $5::text = 'accepted' AND cardinality($11::uuid[]) > 0 AND NOT EXISTS (
            SELECT 1 FROM events e WHERE e.event_id = ANY ($11::uuid[]) AND e.tx_id = pg_current_xact_id())
        THEN 'duplicate' ELSE $5::text END,
    $6, $7, $8, $9, $10, $12)
RETURNING id, outcome`

// Commit implements ledger.Store: every append and the receipt in one implicit transaction, sent as one
// pipelined batch ending in a single Sync: one round trip (plus one, the first time a pooled
// connection sees these statements, to prepare them). A failing append rolls back the others and the
// receipt (TestCommitIsAtomic).
func (s *Store) Commit(ctx context.Context, c ledger.Commit) (ledger.CommitResult, error) {
	for _, a := range c.Appends {
		if err := eventlog.Validate(a.Stream, a.Events); err != nil {
			return ledger.CommitResult{}, fmt.Errorf("commit delivery %s: %w", c.Receipt.DeliveryID, err)
		}
	}
	written := [][16]byte{}
	for _, a := range c.Appends {
		for _, e := range a.Events {
			written = append(written, e.ID)
		}
	}
	rargs := receiptArgs(c.Receipt, written)

	if len(c.Appends) == 0 {
		var (
			id      int64
			outcome string
		)
		if err := s.pool.QueryRow(ctx, insertReceiptSQL, rargs...).Scan(&id, &outcome); err != nil {
			return ledger.CommitResult{}, fmt.Errorf("commit delivery %s: insert receipt: %w", c.Receipt.DeliveryID, translate(err))
		}
		return ledger.CommitResult{Appends: []eventlog.AppendResult{}, Outcome: ledger.Outcome(outcome)}, nil
	}

	// Lock streams in name order: two deliveries touching the same streams then wait for each other
	// instead of deadlocking.
	order := make([]int, len(c.Appends))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return c.Appends[order[i]].Stream < c.Appends[order[j]].Stream })
	batch := &pgx.Batch{}
	for _, i := range order {
		a := c.Appends[i]
		batch.Queue(appendSQL, appendArgs(a.Stream, a.Expected, a.Events)...)
	}
	batch.Queue(insertReceiptSQL, rargs...)
	br := s.pool.SendBatch(ctx, batch)
	res, err := readCommit(br, c, order)
	if closeErr := br.Close(); err == nil && closeErr != nil {
		err = fmt.Errorf("commit delivery %s: %w", c.Receipt.DeliveryID, translate(closeErr))
	}
	if err != nil {
		return ledger.CommitResult{}, err
	}
	for _, a := range res.Appends {
		if !a.Duplicate {
			s.wrote()
			break
		}
	}
	return res, nil
}

// readCommit reads the batch's results; order[k] is the index in c.Appends of the k-th append sent.
func readCommit(br pgx.BatchResults, c ledger.Commit, order []int) (ledger.CommitResult, error) {
	res := ledger.CommitResult{Appends: make([]eventlog.AppendResult, len(c.Appends))}
	for _, i := range order {
		r, err := scanAppend(br.QueryRow())
		if err != nil {
			return ledger.CommitResult{}, fmt.Errorf("commit delivery %s: append to %s: %w", c.Receipt.DeliveryID, c.Appends[i].Stream, translate(err))
		}
		res.Appends[i] = r
	}
	var (
		id      int64
		outcome string
	)
	if err := br.QueryRow().Scan(&id, &outcome); err != nil {
		return ledger.CommitResult{}, fmt.Errorf("commit delivery %s: insert receipt: %w", c.Receipt.DeliveryID, translate(err))
	}
	res.Outcome = ledger.Outcome(outcome)
	return res, nil
}

// InsertReceipt stores a receipt on its own and returns its id. It is for stores whose events live
// elsewhere (EventStoreDB): the outcome is stored as given.
func (s *Store) InsertReceipt(ctx context.Context, r ledger.Receipt) (int64, error) {
	var (
		id      int64
		outcome string
	)
	if err := s.pool.QueryRow(ctx, insertReceiptSQL, receiptArgs(r, nil)...).Scan(&id, &outcome); err != nil {
		return 0, fmt.Errorf("insert receipt %s: %w", r.DeliveryID, translate(err))
	}
	return id, nil
}

func receiptArgs(r ledger.Receipt, written [][16]byte) []any {
	n := len(r.Events)
	bookings, streams, types := make([]string, n), make([]string, n), make([]string, n)
	ids := make([][16]byte, n)
	for i, e := range r.Events {
		bookings[i], streams[i], ids[i], types[i] = string(e.Booking), e.Stream, e.ID, string(e.Type)
	}
	body := r.Body
	if r.Outcome == ledger.OutcomeRejected {
		body = nil // an unverified body is never stored
	}
	return []any{r.Provider, r.ReceivedAt, r.DeliveryID, r.Secret, string(r.Outcome), r.Reason,
		bookings, streams, ids, types, written, body}
}

// StoredReceipt is a receipt as stored.
type StoredReceipt struct {
	ID         int64
	Receipt    ledger.Receipt
	RecordedAt time.Time
}

// ReceiptsForBooking returns every receipt that names bookingID, oldest first.
func (s *Store) ReceiptsForBooking(ctx context.Context, bookingID string) ([]StoredReceipt, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, provider, received_at, delivery_id, secret_ref, outcome, reason,
    bookings, streams, event_ids, event_types, body, recorded_at
FROM receipts WHERE bookings @> ARRAY[$1::text] ORDER BY id`, bookingID)
	if err != nil {
		return nil, fmt.Errorf("receipts of booking %s: %w", bookingID, translate(err))
	}
	defer rows.Close()
	out := []StoredReceipt{}
	for rows.Next() {
		var (
			sr                       StoredReceipt
			outcome                  string
			bookings, streams, types []string
			ids                      [][16]byte
		)
		r := &sr.Receipt
		if err := rows.Scan(&sr.ID, &r.Provider, &r.ReceivedAt, &r.DeliveryID, &r.Secret, &outcome, &r.Reason,
			&bookings, &streams, &ids, &types, &r.Body, &sr.RecordedAt); err != nil {
			return nil, fmt.Errorf("receipts of booking %s: %w", bookingID, translate(err))
		}
		r.Outcome = ledger.Outcome(outcome)
		r.Events = make([]ledger.EventRef, len(ids))
		for i := range ids {
			r.Events[i] = ledger.EventRef{Booking: booking.ID(bookings[i]), Stream: streams[i],
				ID: eventlog.EventID(ids[i]), Type: booking.EventType(types[i])}
		}
		out = append(out, sr)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("receipts of booking %s: %w", bookingID, translate(err))
	}
	return out, nil
}
