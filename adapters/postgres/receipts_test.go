package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/domain/ledger"
)

// receiptIDs are the ids of rs, in their order.
func receiptIDs(rs []postgres.StoredReceipt) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// TestListReceiptsFilters: operators list receipts by outcome and provider, newest first, a page at a
// time (BeforeID) within a limit (DefaultReceiptLimit when none, or a negative one, is given).
func TestListReceiptsFilters(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := testCtx(t)
	type row struct {
		provider string
		outcome  ledger.Outcome
	}
	rows := []row{
		{"calendly", ledger.OutcomeQuarantined}, {"stripe", ledger.OutcomeQuarantined}, {"calendly", ledger.OutcomeAccepted},
		{"calendly", ledger.OutcomeDuplicate}, {"stripe", ledger.OutcomeAccepted}, {"calendly", ledger.OutcomeQuarantined},
		{"acuity", ledger.OutcomeDeferred}, {"stripe", ledger.OutcomeDuplicate},
	}
	ids := make([]int64, len(rows))
	for i, rw := range rows {
		r := commitOf(fmt.Sprintf("d-%d", i)).Receipt
		r.Provider, r.Outcome = rw.provider, rw.outcome
		id, err := s.InsertReceipt(ctx, r)
		require.NoError(t, err)
		ids[i] = id
	}
	// want are the ids of the rows keep selects, newest first.
	want := func(keep func(row) bool) []int64 {
		out := []int64{}
		for i := len(rows) - 1; i >= 0; i-- {
			if keep(rows[i]) {
				out = append(out, ids[i])
			}
		}
		return out
	}
	for _, c := range []struct {
		name   string
		filter postgres.ReceiptFilter
		keep   func(row) bool
	}{
		{"everything", postgres.ReceiptFilter{}, func(row) bool { return true }},
		{"quarantined", postgres.ReceiptFilter{Outcome: ledger.OutcomeQuarantined},
			func(r row) bool { return r.outcome == ledger.OutcomeQuarantined }},
		{"quarantined of one provider", postgres.ReceiptFilter{Outcome: ledger.OutcomeQuarantined, Provider: "calendly"},
			func(r row) bool { return r.outcome == ledger.OutcomeQuarantined && r.provider == "calendly" }},
		{"duplicate", postgres.ReceiptFilter{Outcome: ledger.OutcomeDuplicate},
			func(r row) bool { return r.outcome == ledger.OutcomeDuplicate }},
		{"deferred", postgres.ReceiptFilter{Outcome: ledger.OutcomeDeferred},
			func(r row) bool { return r.outcome == ledger.OutcomeDeferred }},
		{"accepted of one provider", postgres.ReceiptFilter{Outcome: ledger.OutcomeAccepted, Provider: "stripe"},
			func(r row) bool { return r.outcome == ledger.OutcomeAccepted && r.provider == "stripe" }},
		{"one provider", postgres.ReceiptFilter{Provider: "stripe"}, func(r row) bool { return r.provider == "stripe" }},
		{"an unknown provider", postgres.ReceiptFilter{Provider: "cal"}, func(row) bool { return false }},
		{"a negative limit is the default", postgres.ReceiptFilter{Limit: -1}, func(row) bool { return true }},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.ListReceipts(ctx, c.filter)
			require.NoError(t, err)
			assert.Equal(t, want(c.keep), receiptIDs(got))
			for _, r := range got {
				if c.filter.Outcome != "" {
					assert.Equal(t, c.filter.Outcome, r.Receipt.Outcome)
				}
			}
		})
	}

	t.Run("pages", func(t *testing.T) {
		all := []int64{}
		var before int64
		for page := 0; ; page++ {
			require.Less(t, page, len(rows), "paging does not end")
			got, err := s.ListReceipts(ctx, postgres.ReceiptFilter{BeforeID: before, Limit: 3})
			require.NoError(t, err)
			require.LessOrEqual(t, len(got), 3)
			if len(got) == 0 {
				break
			}
			all = append(all, receiptIDs(got)...)
			before = got[len(got)-1].ID
		}
		assert.Equal(t, want(func(row) bool { return true }), all, "each receipt once, newest first")

		got, err := s.ListReceipts(ctx, postgres.ReceiptFilter{Outcome: ledger.OutcomeQuarantined, BeforeID: ids[5], Limit: 1})
		require.NoError(t, err)
		assert.Equal(t, []int64{ids[1]}, receiptIDs(got), "the page after a quarantined receipt, with the filter")
	})
}

func TestListReceiptsDefaultLimit(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := testCtx(t)
	var last int64
	for i := range postgres.DefaultReceiptLimit + 2 {
		id, err := s.InsertReceipt(ctx, commitOf(fmt.Sprintf("d-%d", i)).Receipt)
		require.NoError(t, err)
		last = id
	}
	got, err := s.ListReceipts(ctx, postgres.ReceiptFilter{})
	require.NoError(t, err)
	require.Len(t, got, postgres.DefaultReceiptLimit)
	assert.Equal(t, last, got[0].ID, "the newest first")
	got, err = s.ListReceipts(ctx, postgres.ReceiptFilter{Limit: postgres.DefaultReceiptLimit + 2})
	require.NoError(t, err)
	assert.Len(t, got, postgres.DefaultReceiptLimit+2, "a larger limit given is kept")
}

// TestReceiptAndRelated: a receipt comes with the other receipts of its delivery — the same provider and
// delivery id — oldest first, without itself; a rejected request (no delivery id) has none.
func TestReceiptAndRelated(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := testCtx(t)
	insert := func(provider, deliveryID string, outcome ledger.Outcome) int64 {
		t.Helper()
		r := commitOf(deliveryID).Receipt
		r.Provider, r.Outcome = provider, outcome
		id, err := s.InsertReceipt(ctx, r)
		require.NoError(t, err)
		return id
	}
	deferred := insert("acuity", "acuity:rescheduled:7", ledger.OutcomeDeferred)
	insert("calendly", "acuity:rescheduled:7", ledger.OutcomeAccepted) // another provider's delivery of that id
	insert("acuity", "acuity:rescheduled:8", ledger.OutcomeAccepted)
	finished := insert("acuity", "acuity:rescheduled:7", ledger.OutcomeAccepted)
	rejected := insert("acuity", "", ledger.OutcomeRejected)
	insert("acuity", "", ledger.OutcomeRejected)
	redelivered := insert("acuity", "acuity:rescheduled:7", ledger.OutcomeDuplicate)

	r, related, found, err := s.ReceiptAndRelated(ctx, finished)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, finished, r.ID)
	assert.Equal(t, ledger.OutcomeAccepted, r.Receipt.Outcome)
	assert.Equal(t, []int64{deferred, redelivered}, receiptIDs(related))

	_, related, found, err = s.ReceiptAndRelated(ctx, deferred)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, []int64{finished, redelivered}, receiptIDs(related))

	r, related, found, err = s.ReceiptAndRelated(ctx, rejected)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, rejected, r.ID)
	assert.NotNil(t, related)
	assert.Empty(t, related, "requests without a delivery id are not related to each other")

	_, related, found, err = s.ReceiptAndRelated(ctx, redelivered+1000)
	require.NoError(t, err)
	assert.False(t, found)
	assert.Empty(t, related)
}

func TestReceiptAndRelatedIsBounded(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := testCtx(t)
	var first int64
	for i := range postgres.DefaultReceiptLimit + 2 {
		id, err := s.InsertReceipt(ctx, commitOf("d-often").Receipt)
		require.NoError(t, err)
		if i == 0 {
			first = id
		}
	}
	_, related, found, err := s.ReceiptAndRelated(ctx, first)
	require.NoError(t, err)
	require.True(t, found)
	require.Len(t, related, postgres.DefaultReceiptLimit)
	assert.Equal(t, first+1, related[0].ID, "the oldest first")
}

// TestDuplicatesFold: the first FoldAfter duplicate receipts of one body (provider, delivery id, body)
// within FoldWindow are rows of their own; later ones count on the newest of them. Anything else —
// another provider, delivery or body, another outcome, no body, or a copy after the window — is a row.
func TestDuplicatesFold(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	dup := func(provider, deliveryID, body string, outcome ledger.Outcome, at time.Time) int64 {
		t.Helper()
		r := commitOf(deliveryID).Receipt
		r.Provider, r.Outcome, r.ReceivedAt = provider, outcome, at
		if body != "" {
			r.Body = []byte(body)
		} else {
			r.Body = nil
		}
		id, err := s.InsertReceipt(ctx, r)
		require.NoError(t, err)
		return id
	}
	const body = `{"event":"invitee.created","n":1}`
	seen := map[int64]bool{}
	var newest int64
	for i := range postgres.FoldAfter {
		id := dup("calendly", "d-replayed", body, ledger.OutcomeDuplicate, t0)
		require.False(t, seen[id], "duplicate %d of %d is a row of its own", i+1, postgres.FoldAfter)
		seen[id] = true
		newest = id
	}
	rows := func() int { return count(t, pool, `SELECT count(*) FROM receipts`) }
	require.Equal(t, postgres.FoldAfter, rows())

	// Copies that differ in anything but their time are rows of their own.
	for name, id := range map[string]int64{
		"another provider": dup("stripe", "d-replayed", body, ledger.OutcomeDuplicate, t0.Add(time.Minute)),
		"another delivery": dup("calendly", "d-other", body, ledger.OutcomeDuplicate, t0.Add(time.Minute)),
		"another body":     dup("calendly", "d-replayed", `{"event":"invitee.created","n":2}`, ledger.OutcomeDuplicate, t0.Add(time.Minute)),
		"quarantined":      dup("calendly", "d-replayed", body, ledger.OutcomeQuarantined, t0.Add(time.Minute)),
		"no body":          dup("calendly", "d-replayed", "", ledger.OutcomeDuplicate, t0.Add(time.Minute)),
	} {
		assert.False(t, seen[id], name)
		seen[id] = true
	}
	require.Equal(t, postgres.FoldAfter+5, rows())

	// The next identical duplicate within the window folds into the newest, which keeps the latest time.
	at := t0.Add(30 * time.Minute)
	assert.Equal(t, newest, dup("calendly", "d-replayed", body, ledger.OutcomeDuplicate, at))
	assert.Equal(t, newest, dup("calendly", "d-replayed", body, ledger.OutcomeDuplicate, t0.Add(10*time.Minute)), "an older copy folds too")
	require.Equal(t, postgres.FoldAfter+5, rows())
	_, related, found, err := s.ReceiptAndRelated(ctx, newest)
	require.NoError(t, err)
	require.True(t, found)
	require.NotEmpty(t, related)
	got, err := s.ListReceipts(ctx, postgres.ReceiptFilter{Outcome: ledger.OutcomeDuplicate, BeforeID: newest + 1, Limit: 1})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, newest, got[0].ID)
	assert.Equal(t, 3, got[0].Repeats, "it stands for itself and the two folded copies")
	assert.True(t, got[0].Receipt.ReceivedAt.Equal(t0), got[0].Receipt.ReceivedAt)
	assert.True(t, got[0].LastReceivedAt.Equal(at), "last received %s, not the older copy's time", got[0].LastReceivedAt)

	// A copy received FoldWindow after them is new: the window is open at its start.
	late := dup("calendly", "d-replayed", body, ledger.OutcomeDuplicate, t0.Add(postgres.FoldWindow))
	assert.False(t, seen[late], "a copy a whole window later is a row")
	assert.Equal(t, 1, count(t, pool, `SELECT repeats FROM receipts WHERE id = $1`, late))
}

// TestReceiptsForBookingNameTheDeferredOnes: a deferred receipt has no events yet; the booking it
// waits for (pending_booking) finds it, and no other booking does.
func TestReceiptsForBookingNameTheDeferredOnes(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	r := commitOf("acuity:scheduled:77").Receipt
	r.Provider, r.Outcome = "acuity", ledger.OutcomeDeferred
	id, err := s.InsertReceipt(ctx, r)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE receipts SET pending_booking = 'acuity-77' WHERE id = $1`, id) // as jobs.Queue.Defer stores it
	require.NoError(t, err)

	got, err := s.ReceiptsForBooking(ctx, "acuity-77")
	require.NoError(t, err)
	require.Equal(t, []int64{id}, receiptIDs(got))
	assert.Equal(t, "acuity-77", string(got[0].Receipt.Booking))
	assert.Equal(t, ledger.OutcomeDeferred, got[0].Receipt.Outcome)
	none, err := s.ReceiptsForBooking(ctx, "acuity-7")
	require.NoError(t, err)
	assert.Empty(t, none)
}

// dupReceipt stores a duplicate receipt of deliveryID with body at, through InsertReceipt.
func dupReceipt(t *testing.T, s *postgres.Store, deliveryID, body string, at time.Time) int64 {
	t.Helper()
	r := commitOf(deliveryID).Receipt
	r.Outcome, r.ReceivedAt, r.Body = ledger.OutcomeDuplicate, at, []byte(body)
	id, err := s.InsertReceipt(testCtx(t), r)
	require.NoError(t, err)
	return id
}

// The first copy folded into a receipt may be older than the receipt (copies are received out of
// order; the window reaches both ways): the receipt's latest time then stays its own, never before
// its first (last_received_at starts from received_at, insertReceiptSQL's coalesce).
func TestAnOlderFirstFoldedCopyKeepsTheReceiptsTimeAsItsLatest(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := testCtx(t)
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	const body = `{"event":"invitee.created","n":7}`
	var newest int64
	for range postgres.FoldAfter {
		newest = dupReceipt(t, s, "d-older", body, t0)
	}
	assert.Equal(t, newest, dupReceipt(t, s, "d-older", body, t0.Add(-10*time.Minute)), "folded")
	got, err := s.ListReceipts(ctx, postgres.ReceiptFilter{Outcome: ledger.OutcomeDuplicate, Limit: 1})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, newest, got[0].ID)
	assert.Equal(t, 2, got[0].Repeats)
	assert.True(t, got[0].LastReceivedAt.Equal(t0), "last received %s, not before the receipt's own %s", got[0].LastReceivedAt, t0)
}

// When more than FoldAfter identical duplicates lie within a copy's window (copies of two windows
// apart, and one received between them), the copy folds into the newest receipt, not into one of the
// older ones: the receipts are looked at newest first (insertReceiptSQL's ORDER BY r.id DESC).
func TestACopyFoldsIntoTheNewestOfManyWithinItsWindow(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	const body = `{"event":"invitee.created","n":8}`
	var oldest, newest int64
	for i := range postgres.FoldAfter {
		id := dupReceipt(t, s, "d-many", body, t0)
		if i == 0 {
			oldest = id
		}
	}
	for range postgres.FoldAfter { // a whole window later: rows of their own again
		newest = dupReceipt(t, s, "d-many", body, t0.Add(postgres.FoldWindow))
	}
	require.Equal(t, 2*postgres.FoldAfter, count(t, pool, `SELECT count(*) FROM receipts`))
	require.Greater(t, newest, oldest+int64(postgres.FoldAfter))

	// Received between them, its window holds all of them.
	assert.Equal(t, newest, dupReceipt(t, s, "d-many", body, t0.Add(postgres.FoldWindow/2)))
	assert.Equal(t, 2, count(t, pool, `SELECT repeats FROM receipts WHERE id = $1`, newest))
	assert.Equal(t, 2*postgres.FoldAfter, count(t, pool, `SELECT count(*) FROM receipts`))
}
