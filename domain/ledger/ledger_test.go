package ledger_test

import (
	"context"
	"fmt"
	"testing"

	"bookingledger/adapters/ledgertest"
	"bookingledger/adapters/memstore"
	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
)

// TestLedgerContract runs the ledger service's contract over the in-memory store, without a database;
// the PostgreSQL store and esdb.LedgerStore run the same suite in their own packages.
func TestLedgerContract(t *testing.T) {
	for _, unread := range []bool{false, true} {
		t.Run(fmt.Sprintf("unread new streams=%t", unread), func(t *testing.T) {
			ledgertest.Run(t, func(*testing.T) ledgertest.Fixture {
				s := memstore.New()
				return ledgertest.Fixture{Store: s, UnreadNewStreams: unread, Receipts: func(ctx context.Context, b booking.ID) ([]ledger.Receipt, error) {
					return s.ReceiptsForBooking(ctx, b), nil
				}}
			})
		})
	}
}
