package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
)

// TestQuarantinedReceiptsLeaveOutThoseGiven: the read model passes the receipts that have their item;
// the others come back by id, with the first booking they name, and their count agrees.
func TestQuarantinedReceiptsLeaveOutThoseGiven(t *testing.T) {
	s, pool := newStore(t)
	ctx := testCtx(t)
	var quarantined []int64
	for i, o := range []ledger.Outcome{ledger.OutcomeQuarantined, ledger.OutcomeAccepted, ledger.OutcomeQuarantined, ledger.OutcomeQuarantined} {
		r := commitOf(fmt.Sprintf("q-%d", i)).Receipt
		r.Outcome, r.Reason = o, fmt.Sprintf("reason %d", i)
		if i == 2 {
			r.Events = []ledger.EventRef{{Booking: "bk-q2", Stream: booking.StreamPrefix + "bk-q2", Type: "booking.scheduled.v1"}}
		}
		id, err := s.InsertReceipt(ctx, r)
		require.NoError(t, err)
		if o == ledger.OutcomeQuarantined {
			quarantined = append(quarantined, id)
		}
	}
	read := func(except []int64) (got []postgres.QuarantinedReceipt, n int64) {
		t.Helper()
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			if got, err = s.QuarantinedReceipts(ctx, tx, except); err != nil {
				return err
			}
			n, err = s.CountQuarantinedExcept(ctx, tx, except)
			return err
		}))
		return got, n
	}
	got, n := read(nil)
	require.Len(t, got, 3)
	assert.Equal(t, int64(3), n)
	assert.Equal(t, postgres.QuarantinedReceipt{ID: quarantined[0], Provider: "calendly", DeliveryID: "q-0", Reason: "reason 0"}, got[0])
	assert.Equal(t, postgres.QuarantinedReceipt{ID: quarantined[1], Provider: "calendly", DeliveryID: "q-2", Reason: "reason 2", Booking: "bk-q2"}, got[1])

	got, n = read([]int64{quarantined[0], quarantined[2], -1})
	require.Len(t, got, 1)
	assert.Equal(t, quarantined[1], got[0].ID)
	assert.Equal(t, int64(1), n)
}

// TestLastWebhookDelivery is the newest verified delivery of the provider: not a sync's receipt, not
// a rejected request, not another provider's.
func TestLastWebhookDelivery(t *testing.T) {
	s, _ := newStore(t)
	ctx := testCtx(t)
	provider := fmt.Sprintf("p%d", time.Now().UnixNano())
	_, ok, err := s.LastWebhookDelivery(ctx, provider)
	require.NoError(t, err)
	assert.False(t, ok, "no delivery yet")

	base := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, c := range []struct {
		provider, delivery string
		outcome            ledger.Outcome
	}{
		{provider, "d-1", ledger.OutcomeAccepted},
		{provider, "d-2", ledger.OutcomeQuarantined},
		{provider, ledger.SyncDeliveryPrefix + "x", ledger.OutcomeAccepted},
		{provider, "d-3", ledger.OutcomeRejected},
		{provider + "-other", "d-4", ledger.OutcomeAccepted},
	} {
		r := commitOf(c.delivery).Receipt
		r.Provider, r.Outcome, r.ReceivedAt = c.provider, c.outcome, base.Add(time.Duration(i)*time.Minute)
		_, err := s.InsertReceipt(ctx, r)
		require.NoError(t, err)
	}
	at, ok, err := s.LastWebhookDelivery(ctx, provider)
	require.NoError(t, err)
	require.True(t, ok)
	assert.True(t, at.Equal(base.Add(time.Minute)), "last delivery %s", at)
}
