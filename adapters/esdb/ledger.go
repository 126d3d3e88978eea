package esdb

import (
	"context"
	"fmt"

	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

// ReceiptWriter stores delivery receipts and the personal data beside the events. adapters/postgres.Store
// provides it; it is declared here, by its consumer, so that this package does not import the
// PostgreSQL adapter.
type ReceiptWriter interface {
	InsertReceipt(ctx context.Context, r ledger.Receipt) (int64, error)
	SavePersonal(ctx context.Context, p ledger.Personal) error
}

// LedgerStore is ledger.Store with events in EventStoreDB and receipts elsewhere (PostgreSQL).
//
// The two cannot commit atomically, so Commit appends first and writes the receipt second. A failure
// between the two leaves events without a receipt and makes Commit fail: the HTTP layer answers 503
// and the provider retries. The retry reads the stream, finds its event IDs and commits a duplicate
// receipt without appending again. Events never exist twice, and every delivery that was answered 2xx
// has its receipt; what can exist is an event whose receipt arrives only with the provider's retry.
// The opposite order would be unsafe: a receipt saying "accepted" for an event that was never stored.
type LedgerStore struct {
	events   eventlog.Store
	receipts ReceiptWriter
}

var _ ledger.Store = (*LedgerStore)(nil)

// NewLedgerStore combines an event store (normally *Store) and a receipt writer.
func NewLedgerStore(events eventlog.Store, receipts ReceiptWriter) *LedgerStore {
	return &LedgerStore{events: events, receipts: receipts}
}

// ReadStream reads a booking stream from the event store.
func (l *LedgerStore) ReadStream(ctx context.Context, stream string) ([]eventlog.RecordedEvent, error) {
	return l.events.ReadStream(ctx, stream)
}

// Commit saves the personal data first (so that a booking's contact exists whenever its events do),
// appends each Append in order, then writes the receipt. A receipt committed as accepted is
// stored as duplicate when every append turned out to be an idempotent re-append (a concurrent copy of
// the delivery won the race between the ledger's read and this commit). Errors from an append are
// returned as they are (ErrVersionConflict makes the ledger reload and decide again); a failed receipt
// write is wrapped with eventlog.ErrUnavailable so that the delivery is answered 503 and retried.
func (l *LedgerStore) Commit(ctx context.Context, c ledger.Commit) (ledger.CommitResult, error) {
	if err := l.receipts.SavePersonal(ctx, c.Personal); err != nil {
		return ledger.CommitResult{}, fmt.Errorf("%w: delivery %s: %w", eventlog.ErrUnavailable, c.Receipt.DeliveryID, err)
	}
	res := ledger.CommitResult{Appends: make([]eventlog.AppendResult, 0, len(c.Appends))}
	allDuplicate := len(c.Appends) > 0
	for _, a := range c.Appends {
		ar, err := l.events.Append(ctx, a.Stream, a.Expected, a.Events)
		if err != nil {
			return ledger.CommitResult{}, err
		}
		res.Appends = append(res.Appends, ar)
		allDuplicate = allDuplicate && ar.Duplicate
	}
	r := c.Receipt
	if r.Outcome == ledger.OutcomeAccepted && allDuplicate {
		r.Outcome = ledger.OutcomeDuplicate
	}
	if _, err := l.receipts.InsertReceipt(ctx, r); err != nil {
		if len(c.Appends) > 0 {
			return ledger.CommitResult{}, fmt.Errorf("%w: events appended, receipt of delivery %s not written (the provider's retry records it as duplicate): %w",
				eventlog.ErrUnavailable, r.DeliveryID, err)
		}
		return ledger.CommitResult{}, fmt.Errorf("%w: receipt of delivery %s not written: %w", eventlog.ErrUnavailable, r.DeliveryID, err)
	}
	res.Outcome = r.Outcome
	return res, nil
}
