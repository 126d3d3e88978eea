package readmodel_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/privacy"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
	"bookingledger/projections/history"
)

// The seeds' story: a booking for 10:00 is canceled four minutes after it was made. The create's first
// delivery failed on our side, so the provider retried it only after the cancel had arrived, and then
// once more. The slot must end up free and the late create must be visible in the history.
func TestSeedStory_CanceledTenOClockBookingWithCreateRetriedAfterCancel(t *testing.T) {
	t.Parallel()
	const host = "https://api.calendly.com/users/HOST-SEED"
	id := booking.ID("calendly-seed-10am")
	booked := day.Add(-24*time.Hour + 9*time.Hour) // made the day before at 09:00
	create := created(id, booked, slot("https://api.calendly.com/scheduled_events/EV-SEED", at(10, 0), 30, host))
	cancel := canceled(id, booked.Add(4*time.Minute), "changed my mind")

	t.Run("create retried after the cancel", func(t *testing.T) {
		t.Parallel() // on a database of its own
		e := newEnv(t)
		assert.Equal(t, ledger.OutcomeAccepted, e.deliver(t, one("calendly-cancel-1", cancel)).Outcome)
		assert.Equal(t, ledger.OutcomeAccepted, e.deliver(t, one("calendly-create-1", create)).Outcome)
		assert.Equal(t, ledger.OutcomeDuplicate, e.deliver(t, one("calendly-create-1", create)).Outcome)
		// Someone else books the freed slot later: no conflict.
		e.deliver(t, one("calendly-other", created("calendly-next", booked.Add(time.Hour), slot("EV-NEXT", at(10, 0), 30, host))))
		e.catchUp(t)
		if e.backend.esdb != nil {
			assert.Zero(t, e.count(t, "events"), "with EventStoreDB selected, no event is in PostgreSQL")
			assert.Equal(t, 2, e.backend.esdb.StreamLength(id.Stream()))
		}

		b := e.booking(t, id)
		assert.Equal(t, calendar.StatusCanceled, b.Status)
		assert.False(t, b.Holder)
		assert.Equal(t, at(10, 0), b.Start, "the canceled slot stays known")
		assert.Equal(t, []string{"calendly-next"}, e.holders(t), "the slot is free for the next booking")
		assert.Empty(t, e.openItems(t))

		h, err := e.rm.History(context.Background(), id)
		require.NoError(t, err)
		require.Len(t, h.Receipts, 3)
		assert.Equal(t, []ledger.Outcome{ledger.OutcomeAccepted, ledger.OutcomeAccepted, ledger.OutcomeDuplicate},
			[]ledger.Outcome{h.Receipts[0].Outcome, h.Receipts[1].Outcome, h.Receipts[2].Outcome})
		assert.Equal(t, "calendly-create-1", h.Receipts[2].DeliveryID)
		assert.Equal(t, "0:3f2a9c", h.Receipts[2].Secret)

		require.Len(t, h.Events, 2)
		assert.Equal(t, booking.TypeCanceled, h.Events[0].Type, "arrival order: the cancel came first")
		assert.Equal(t, uint64(1), h.Events[0].Version)
		assert.Equal(t, 2, h.Events[0].FoldIndex)
		assert.Equal(t, booking.TypeScheduled, h.Events[1].Type)
		assert.Equal(t, 1, h.Events[1].FoldIndex)
		assert.Equal(t, booked, h.Events[1].OccurredAt)
		assert.Equal(t, []eventlog.EventID{create.ID, cancel.ID}, h.FoldOrder, "the fold used provider order")

		kinds := map[history.FindingKind]history.HistoryFinding{}
		for _, f := range h.Findings {
			kinds[f.Kind] = f
		}
		require.Contains(t, kinds, history.FindingOutOfOrder)
		assert.Equal(t, create.ID, kinds[history.FindingOutOfOrder].Event)
		assert.Contains(t, kinds[history.FindingOutOfOrder].Reason, "arrived after booking.canceled.v1 v1")
		require.Contains(t, kinds, history.FindingDuplicateDelivery)
		assert.Contains(t, kinds[history.FindingDuplicateDelivery].Reason, `"calendly-create-1"`)
		assert.NotContains(t, kinds, history.FindingLateEvent, "the create precedes the cancel in provider time: it applied")

		var buf bytes.Buffer
		require.NoError(t, history.WriteTimeline(&buf, h))
		out := buf.String()
		t.Log("\n" + out)
		for _, want := range []string{"booking calendly-seed-10am (calendly)", "status:   canceled", "out_of_order", "duplicate_delivery",
			"delivery calendly-create-1", "fold order"} {
			assert.Contains(t, out, want)
		}
	})

	t.Run("late create stamped after the cancel is refused", func(t *testing.T) {
		t.Parallel() // on a database of its own
		e := newEnv(t)
		late := event(id, "created-resent", booked.Add(10*time.Minute), booking.Scheduled{Slot: create.Payload.(booking.Scheduled).Slot, Capacity: 1})
		e.deliver(t, one("d-create", create))
		e.deliver(t, one("d-cancel", cancel))
		e.deliver(t, one("d-late", late))
		e.catchUp(t)

		b := e.booking(t, id)
		assert.Equal(t, calendar.StatusCanceled, b.Status)
		assert.Empty(t, e.holders(t), "the slot stays free")
		require.Len(t, b.Findings, 1)
		assert.Equal(t, booking.FindingAfterTerminal, b.Findings[0].Code)

		items := e.openItems(t)
		require.Len(t, items, 1)
		assert.Equal(t, calendar.ItemLateEvent, items[0].Kind)
		assert.Equal(t, late.ID, items[0].EventID)

		h, err := e.rm.History(context.Background(), id)
		require.NoError(t, err)
		var late1 *history.HistoryFinding
		for i, f := range h.Findings {
			if f.Kind == history.FindingLateEvent {
				late1 = &h.Findings[i]
			}
		}
		require.NotNil(t, late1, "the refused create is a finding")
		assert.Equal(t, late.ID, late1.Event)
		assert.Equal(t, string(booking.FindingAfterTerminal), late1.Code)
		assert.Contains(t, late1.Reason, "kept but refused")
		require.Len(t, h.Events, 3)
		assert.False(t, h.Events[2].Applied)
		assert.Contains(t, h.Events[2].Effect, "changed nothing")
	})
}

func TestHistoryOfUnknownBooking(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.rm.History(context.Background(), "calendly-nobody")
	assert.ErrorIs(t, err, projections.ErrNotFound)
}

func TestHistoryShowsConflicts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.deliver(t, one("h-1", created("calendly-h1", at(-5, 0), slot("m1", at(8, 0), 60, "host-h"))))
	e.deliver(t, one("h-2", created("calendly-h2", at(-4, 0), slot("m2", at(8, 30), 60, "host-h"))))
	e.catchUp(t)
	for _, id := range []booking.ID{"calendly-h1", "calendly-h2"} {
		h, err := e.rm.History(context.Background(), id)
		require.NoError(t, err)
		var conflicts []history.HistoryFinding
		for _, f := range h.Findings {
			if f.Kind == history.FindingConflict {
				conflicts = append(conflicts, f)
			}
		}
		require.Len(t, conflicts, 1, id)
		assert.Contains(t, conflicts[0].Reason, "calendly-h1 holds the slot")
	}
}

// A cancel's reason is a person's free text: the stored event and the calendar row hold none of it,
// the history shows it from the free-text table, and once erased shows when instead.
func TestHistoryShowsTheCancelReasonKeptApartUntilErased(t *testing.T) {
	t.Parallel()
	const reason = "my daughter's recital"
	id := booking.ID("calendly-reason")
	create := created(id, day.Add(-time.Hour), slot("https://api.calendly.com/scheduled_events/EV-R", at(11, 0), 30, "host-r"))
	cancel := canceled(id, day.Add(-30*time.Minute), reason)
	e := newEnv(t)
	e.deliver(t, one("d-create", create))
	e.deliver(t, one("d-cancel", cancel))
	e.catchUp(t)

	recs, err := e.store.ReadStream(context.Background(), id.Stream())
	require.NoError(t, err)
	require.Len(t, recs, 2)
	for _, r := range recs {
		assert.NotContains(t, string(r.Data)+string(r.Metadata), "recital", "event v%d", r.Version)
	}
	assert.Empty(t, e.booking(t, id).CancelReason, "the calendar row is folded from the events alone")

	h, err := e.rm.History(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, reason, h.State.CancelReason)
	require.Len(t, h.Events, 2)
	assert.Equal(t, "canceled by invitee: "+reason, h.Events[1].Summary)

	n, err := privacy.NewTexts(e.pool).EraseBooking(context.Background(), e.pool, id)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	n, err = privacy.NewTexts(e.pool).EraseBooking(context.Background(), e.pool, id)
	require.NoError(t, err)
	assert.Zero(t, n, "erasing again finds nothing left")
	// A redelivery of the cancel after the erasure cannot bring the text back.
	assert.Equal(t, ledger.OutcomeDuplicate, e.deliver(t, one("d-cancel-again", cancel)).Outcome)

	h, err = e.rm.History(context.Background(), id)
	require.NoError(t, err)
	mark := history.ErasedMark(time.Now())
	assert.Equal(t, mark, h.State.CancelReason)
	assert.Equal(t, "canceled by invitee: "+mark, h.Events[1].Summary)
	var buf bytes.Buffer
	require.NoError(t, history.WriteTimeline(&buf, h))
	assert.NotContains(t, buf.String(), "recital")
	assert.Contains(t, buf.String(), "[erased on ")
}
