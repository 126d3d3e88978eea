package postgres_test

import (
	"context"
	"fmt"
	"testing"

	"bookingledger/adapters/ledgertest"
	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
)

// TestLedgerContract runs the ledger's storage contract, each test on a fresh database, with and
// without ledger.Service.WithUnreadNewStreams (which serve uses with this store). The suite calls the
// factory first thing in each of its subtests, so the subtests run in parallel, as the tests do.
func TestLedgerContract(t *testing.T) {
	t.Parallel()
	for _, unread := range []bool{false, true} {
		t.Run(fmt.Sprintf("unread new streams=%t", unread), func(t *testing.T) {
			t.Parallel()
			ledgertest.Run(t, func(t *testing.T) ledgertest.Fixture {
				t.Parallel()
				s, _ := newStore(t)
				return ledgertest.Fixture{Store: s, UnreadNewStreams: unread, Receipts: func(ctx context.Context, b booking.ID) ([]ledger.Receipt, error) {
					stored, err := s.ReceiptsForBooking(ctx, string(b))
					out := make([]ledger.Receipt, len(stored))
					for i, r := range stored {
						out[i] = r.Receipt
					}
					return out, err
				}}
			})
		})
	}
}
