package history_test

import (
	"bytes"
	"strings"
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

func recorded(stream string, events ...booking.Event) []eventlog.RecordedEvent {
	out := make([]eventlog.RecordedEvent, len(events))
	for i, e := range events {
		out[i] = eventlog.RecordedEvent{StreamID: stream, Version: uint64(i + 1), ID: e.ID}
	}
	return out
}

func accepted(id int64, events ...booking.Event) history.ReceiptEntry {
	r := history.ReceiptEntry{ID: id, Provider: "calendly", DeliveryID: "d", Outcome: ledger.OutcomeAccepted}
	for _, e := range events {
		r.Events = append(r.Events, ledger.EventRef{Booking: e.Booking, ID: e.ID, Type: e.Type()})
	}
	return r
}

func findingsOf(h history.History, kind history.FindingKind) []history.HistoryFinding {
	var out []history.HistoryFinding
	for _, f := range h.Findings {
		if f.Kind == kind {
			out = append(out, f)
		}
	}
	return out
}

// Events that arrive in the order the fold uses are never out of order; an event the fold puts
// before one that arrived earlier is, and a duplicate receipt naming both does not make them one
// delivery (only accepted receipts say what arrived together).
func TestHistoryOutOfOrderIsOnlyAnOvertakenEvent(t *testing.T) {
	sl := at("m", 60, 120)
	create := ev("a", 1, 0, booking.Scheduled{Slot: sl})
	noShow := ev("a", 2, 5, booking.NoShowMarked{})
	cancel := ev("a", 3, 10, booking.Canceled{})
	h := history.BuildHistory(history.HistoryInput{Booking: "a", Recorded: recorded("booking-a", create, noShow, cancel),
		Events: []booking.Event{cancel, create, noShow}, Receipts: []history.ReceiptEntry{accepted(1, create), accepted(2, noShow), accepted(3, cancel)}})
	assert.Empty(t, h.Findings, "in-order arrival has no finding")

	early := ev("a", 4, 2, booking.NoShowCleared{})
	dup := accepted(9, noShow, cancel, early)
	dup.Outcome = ledger.OutcomeDuplicate
	h = history.BuildHistory(history.HistoryInput{Booking: "a", Recorded: recorded("booking-a", create, noShow, cancel, early),
		Events:   []booking.Event{create, noShow, cancel, early},
		Receipts: []history.ReceiptEntry{dup, accepted(1, create), accepted(2, noShow), accepted(3, cancel), accepted(4, early)}})
	ooo := findingsOf(h, history.FindingOutOfOrder)
	require.Len(t, ooo, 1)
	assert.Equal(t, early.ID, ooo[0].Event)
	assert.Contains(t, ooo[0].Reason, "arrived after booking.no_show_marked.v1 v2")
	assert.Contains(t, ooo[0].Reason, "booking.canceled.v1 v3")
	assert.NotContains(t, ooo[0].Reason, "scheduled")
}

// A duplicate delivery's finding lists the booking's own events only, and says how often a folded
// receipt was received.
func TestHistoryDuplicateDeliveryFinding(t *testing.T) {
	create := ev("a", 1, 0, booking.Scheduled{Slot: at("m", 60, 120)})
	otherCancel := ev("b", 2, 0, booking.Canceled{})
	dup := accepted(2, create, otherCancel)
	dup.Outcome, dup.Repeats = ledger.OutcomeDuplicate, 3
	dup.ReceivedAt, dup.LastReceivedAt = t0, t0.Add(time.Minute)
	h := history.BuildHistory(history.HistoryInput{Booking: "a", Recorded: recorded("booking-a", create), Events: []booking.Event{create},
		Receipts: []history.ReceiptEntry{accepted(1, create), dup}})
	fs := findingsOf(h, history.FindingDuplicateDelivery)
	require.Len(t, fs, 1)
	assert.Equal(t, int64(2), fs[0].ReceiptID)
	assert.Contains(t, fs[0].Reason, "received 3 times from 2027-03-15T09:00:00Z to 2027-03-15T09:01:00Z")
	assert.Contains(t, fs[0].Reason, "(booking.scheduled.v1 v1)")
}

// Conflict items become findings naming the other booking, seen from either side, with how a
// closed one was closed; items of other kinds do not.
func TestHistoryConflictFindings(t *testing.T) {
	create := ev("a", 1, 0, booking.Scheduled{Slot: at("m", 60, 120)})
	items := []calendar.Item{
		{ID: 1, Kind: calendar.ItemConflict, Booking: "x", OtherBooking: "a", Reason: "x overlaps a"},
		{ID: 2, Kind: calendar.ItemConflict, Booking: "a", OtherBooking: "y", Reason: "a overlaps y",
			ClosedAt: t0, ClosedBy: calendar.ClosedByOperator, ResolvedBy: "alice", Note: "moved by phone"},
		{ID: 3, Kind: calendar.ItemLateEvent, Booking: "a", EventID: create.ID, Reason: "late"},
	}
	h := history.BuildHistory(history.HistoryInput{Booking: "a", Recorded: recorded("booking-a", create), Events: []booking.Event{create}, Items: items})
	require.Len(t, h.Findings, 2, "%+v", h.Findings)
	assert.Equal(t, history.HistoryFinding{Kind: history.FindingConflict, OtherBooking: "x", Reason: "x overlaps a"}, h.Findings[0])
	assert.Equal(t, booking.ID("y"), h.Findings[1].OtherBooking)
	assert.Equal(t, "a overlaps y [closed 2027-03-15T09:00:00Z by operator alice: moved by phone]", h.Findings[1].Reason)
}

// A cancel's reason, kept apart from its event, is put back for the auditor: in the event's summary
// and the state, over the projected row's (folded without it); an erased one shows when it was erased.
func TestHistoryPutsKeptTextsBack(t *testing.T) {
	create := ev("a", 1, 0, booking.Scheduled{Slot: at("m", 60, 120)})
	cancel := ev("a", 2, 5, booking.Canceled{CanceledBy: "invitee"})
	row := calendar.BookingRow(input(create, cancel))
	require.Empty(t, row.CancelReason)
	text := history.KeptText{FreeText: booking.FreeText{Booking: "a", Event: cancel.ID, Field: booking.FieldCancelReason, Text: "sick"}}
	h := history.BuildHistory(history.HistoryInput{Booking: "a", Recorded: recorded("booking-a", create, cancel),
		Events: []booking.Event{create, cancel}, Row: &row, Texts: []history.KeptText{text}})
	assert.True(t, h.Projected)
	assert.Equal(t, "sick", h.State.CancelReason)
	assert.Equal(t, "canceled by invitee: sick", h.Events[1].Summary)

	text.ErasedAt = t0.Add(36 * time.Hour)
	h = history.BuildHistory(history.HistoryInput{Booking: "a", Recorded: recorded("booking-a", create, cancel),
		Events: []booking.Event{create, cancel}, Texts: []history.KeptText{text}})
	assert.Equal(t, "[erased on 2027-03-16]", h.State.CancelReason)
	assert.Equal(t, "canceled by invitee: [erased on 2027-03-16]", h.Events[1].Summary)
}

// The timeline says what an auditor must not miss: a state not from the read model, the calendar's
// status beside the booking's own, who holds the slot, linked resources, finding codes, repeats.
func TestWriteTimelineShowsWhatTheRowSays(t *testing.T) {
	cancel := ev("a", 1, 0, booking.Canceled{})
	create := ev("a", 2, 5, booking.Scheduled{Slot: booking.Slot{Meeting: "m", Resources: []string{"h1", "h2"}, Start: t0, End: t0.Add(time.Hour)}})
	dup := accepted(2, create)
	dup.Outcome, dup.Repeats, dup.LastReceivedAt = ledger.OutcomeDuplicate, 4, t0.Add(time.Minute)
	in := history.HistoryInput{Booking: "a", Recorded: recorded("booking-a", cancel, create), Events: []booking.Event{cancel, create},
		Receipts: []history.ReceiptEntry{accepted(1, cancel), dup}}
	var buf bytes.Buffer
	require.NoError(t, history.WriteTimeline(&buf, history.BuildHistory(in)))
	out := buf.String()
	assert.Contains(t, out, "(not in the calendar read model; state computed from the events alone)")
	assert.Contains(t, out, "- late_event/after_terminal: ")
	assert.Contains(t, out, "duplicate ×4 (last 2027-03-15 09:01:00.000Z)")
	assert.NotContains(t, out, "holds its slot")

	row := calendar.BookingRow(input(ev("a", 2, 5, booking.Scheduled{Slot: at("m", 0, 60), RescheduledFrom: "old"})))
	row.Status, row.Holder = calendar.StatusConflict, false
	row.Resources, row.Canonical = []string{"h1", "h2"}, []string{"dr-smith", "h2"}
	in = history.HistoryInput{Booking: "a", Recorded: recorded("booking-a", create), Events: []booking.Event{create}, Row: &row}
	buf.Reset()
	require.NoError(t, history.WriteTimeline(&buf, history.BuildHistory(in)))
	out = buf.String()
	assert.NotContains(t, out, "not in the calendar read model")
	assert.Contains(t, out, "status:   conflict (booking's own: active)\n")
	assert.Contains(t, out, " on dr-smith (h1), h2 (meeting m)")

	row.Status, row.Holder = calendar.StatusActive, true
	buf.Reset()
	require.NoError(t, history.WriteTimeline(&buf, history.BuildHistory(in)))
	assert.Contains(t, buf.String(), "status:   active, holds its slot\n")
}

func TestWriteReceiptShowsABodyThatIsNotUTF8AsBase64(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, history.WriteReceipt(&buf, history.ReceiptDetail{ReceiptEntry: history.ReceiptEntry{ID: 1}, Body: []byte{0xff, 0xfe}}))
	assert.Contains(t, buf.String(), "body (2 bytes, not UTF-8; base64)\n//4=\n")
	buf.Reset()
	require.NoError(t, history.WriteReceipt(&buf, history.ReceiptDetail{ReceiptEntry: history.ReceiptEntry{ID: 1}, Body: []byte(`{"a":1}`)}))
	assert.True(t, strings.Contains(buf.String(), "body (7 bytes)\n{\"a\":1}\n"))
}

// An event the provider sync appended says so in the timeline, and its receipt is marked as the
// sync's; an event a webhook brought first does not, whatever the sync read later.
func TestWriteTimelineMarksWhatTheSyncBrought(t *testing.T) {
	create := ev("a", 1, 0, booking.Scheduled{Slot: at("m", 60, 120)})
	cancel := ev("a", 2, 5, booking.Canceled{CanceledBy: "host"})
	hook := accepted(1, create)
	bySync := accepted(2, create, cancel)
	bySync.DeliveryID = ledger.SyncDeliveryPrefix + "invitee https://api.calendly.com/x"
	in := history.HistoryInput{Booking: "a", Recorded: recorded("booking-a", create, cancel), Events: []booking.Event{create, cancel},
		Receipts: []history.ReceiptEntry{hook, bySync}}
	var buf bytes.Buffer
	require.NoError(t, history.WriteTimeline(&buf, history.BuildHistory(in)))
	out := buf.String()
	assert.Equal(t, 1, strings.Count(out, "(by sync: no webhook had brought it)"), out)
	assert.Regexp(t, `canceled by host \(by sync: no webhook had brought it\)`, out)
	assert.Regexp(t, `delivery sync:invitee https://api.calendly.com/x\s+by sync\s+accepted`, out)
}
