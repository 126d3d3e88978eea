package history_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
	"bookingledger/projections/calendar"
	"bookingledger/projections/history"
)

func TestBuildHistory(t *testing.T) {
	sl := booking.Slot{Meeting: "m", Resources: []string{"h"}, Start: t0.Add(24 * time.Hour), End: t0.Add(25 * time.Hour)}
	cancel := ev("a", 2, 4, booking.Canceled{Reason: "changed my mind"})
	create := ev("a", 1, 0, booking.Scheduled{Slot: sl})
	late := ev("a", 3, 9, booking.Scheduled{Slot: sl})
	recorded := []eventlog.RecordedEvent{
		{StreamID: "booking-a", Version: 3, ID: late.ID},
		{StreamID: "booking-a", Version: 1, ID: cancel.ID},
		{StreamID: "booking-a", Version: 2, ID: create.ID},
	}
	h := history.BuildHistory(history.HistoryInput{
		Booking: "a", Recorded: recorded, Events: []booking.Event{late, cancel, create},
		Receipts: []history.ReceiptEntry{
			{ID: 1, Provider: "calendly", DeliveryID: "d1", Outcome: ledger.OutcomeAccepted, Events: []ledger.EventRef{{Booking: "a", ID: cancel.ID}}},
			{ID: 2, Provider: "calendly", DeliveryID: "d2", Outcome: ledger.OutcomeDuplicate, Events: []ledger.EventRef{{Booking: "a", ID: cancel.ID, Type: booking.TypeCanceled}}},
		},
	})
	require.Len(t, h.Events, 3)
	assert.Equal(t, []uint64{1, 2, 3}, []uint64{h.Events[0].Version, h.Events[1].Version, h.Events[2].Version}, "arrival order")
	assert.Equal(t, []eventlog.EventID{create.ID, cancel.ID, late.ID}, h.FoldOrder)
	assert.Equal(t, calendar.StatusCanceled, h.State.Status)
	assert.False(t, h.Projected)
	assert.False(t, h.Events[2].Applied)

	kinds := map[history.FindingKind]int{}
	for _, f := range h.Findings {
		kinds[f.Kind]++
	}
	assert.Equal(t, map[history.FindingKind]int{
		history.FindingDuplicateDelivery: 1, history.FindingOutOfOrder: 1, history.FindingLateEvent: 1,
	}, kinds, "the late create after the cancel is both refused and, arriving last, not out of order")

	var buf bytes.Buffer
	require.NoError(t, history.WriteTimeline(&buf, h))
	for _, want := range []string{"booking a (calendly)", "receipts (2)", "events in arrival order (3)", "REFUSED", "fold order", "findings (3)"} {
		assert.Contains(t, buf.String(), want)
	}
}

func TestWriteItemsAndCalendar(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, calendar.WriteItems(&buf, []calendar.Item{
		{ID: 4, Kind: calendar.ItemConflict, Booking: "b", OtherBooking: "a", OpenedAt: t0, Reason: "b overlaps a"},
		{ID: 5, Kind: calendar.ItemQuarantined, ReceiptID: 9, OpenedAt: t0, Reason: "bad body"},
	}))
	assert.Contains(t, buf.String(), "b vs a")
	assert.Contains(t, buf.String(), "receipt #9")
	buf.Reset()
	require.NoError(t, calendar.WriteCalendar(&buf, []calendar.CalendarEntry{{Booking: "a", Resource: "h", Start: t0, End: t0.Add(time.Hour), Status: calendar.StatusActive, Meeting: "m"}}))
	assert.Contains(t, buf.String(), "2027-03-15T09:00:00Z  2027-03-15T10:00:00Z  h")
	buf.Reset()
	require.NoError(t, calendar.WriteItems(&buf, nil))
	assert.Equal(t, "no open reconciliation items\n", buf.String())
}

// Acuity's first delivery lists its observed slot before its creation anchor, which the fold puts
// first: both are appended in one commit, so they arrived together and neither is out of order. A
// later delivery that the fold orders before a stored event still is.
func TestEventsOfOneDeliveryAreNotOutOfOrder(t *testing.T) {
	sl := booking.Slot{Meeting: "m", Resources: []string{"h"}, Start: t0.Add(24 * time.Hour), End: t0.Add(25 * time.Hour)}
	observed := ev("acuity-1", 1, 5, booking.Rescheduled{Slot: sl})
	anchor := ev("acuity-1", 2, 1, booking.Scheduled{Slot: sl, Capacity: 1})
	recorded := []eventlog.RecordedEvent{
		{StreamID: "booking-acuity-1", Version: 1, ID: observed.ID},
		{StreamID: "booking-acuity-1", Version: 2, ID: anchor.ID},
	}
	first := history.ReceiptEntry{ID: 1, Provider: "acuity", DeliveryID: "acuity:scheduled:1", Outcome: ledger.OutcomeAccepted,
		Events: []ledger.EventRef{{Booking: "acuity-1", ID: observed.ID}, {Booking: "acuity-1", ID: anchor.ID}}}
	h := history.BuildHistory(history.HistoryInput{
		Booking: "acuity-1", Recorded: recorded, Events: []booking.Event{observed, anchor},
		Receipts: []history.ReceiptEntry{first},
	})
	assert.Equal(t, []eventlog.EventID{anchor.ID, observed.ID}, h.FoldOrder)
	assert.Empty(t, h.Findings, "a normal first delivery has no finding")

	// A move observed earlier than the stored slot, arriving in a later delivery, is out of order.
	earlier := ev("acuity-1", 3, 3, booking.Rescheduled{Slot: sl})
	h = history.BuildHistory(history.HistoryInput{
		Booking: "acuity-1", Events: []booking.Event{observed, anchor, earlier},
		Recorded: append(recorded, eventlog.RecordedEvent{StreamID: "booking-acuity-1", Version: 3, ID: earlier.ID}),
		Receipts: []history.ReceiptEntry{first, {ID: 2, Provider: "acuity", Outcome: ledger.OutcomeAccepted,
			Events: []ledger.EventRef{{Booking: "acuity-1", ID: earlier.ID}, {Booking: "acuity-1", ID: anchor.ID}}}},
	})
	require.Len(t, h.Findings, 1, "%+v", h.Findings)
	assert.Equal(t, history.FindingOutOfOrder, h.Findings[0].Kind)
	assert.Equal(t, earlier.ID, h.Findings[0].Event)
}
