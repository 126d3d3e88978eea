package history

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
	"bookingledger/projections/calendar"
)

// FindingKind classifies what the auditor's history points out.
type FindingKind string

const (
	// FindingDuplicateDelivery: a delivery carried only events already stored (receipt outcome duplicate).
	FindingDuplicateDelivery FindingKind = "duplicate_delivery"
	// FindingOutOfOrder: an event arrived after events that its provider time orders after it.
	FindingOutOfOrder FindingKind = "out_of_order"
	// FindingLateEvent: the fold kept an event that changed nothing (a create after its cancel).
	FindingLateEvent FindingKind = "late_event"
	// FindingConflict: the booking lost its slot to a holder of another meeting, or holds it against one.
	FindingConflict FindingKind = "conflict"
	// FindingQuarantined: a verified delivery naming the booking could not be mapped or validated.
	FindingQuarantined FindingKind = "quarantined"
)

// ReceiptEntry is one delivery receipt naming the booking.
type ReceiptEntry struct {
	ID         int64
	Provider   string
	ReceivedAt time.Time
	DeliveryID string
	// Secret names the configured secret that verified the delivery (never the secret itself).
	Secret  string
	Outcome ledger.Outcome
	Reason  string
	Events  []ledger.EventRef
	// Repeats is how many identical deliveries the receipt stands for (duplicates of a replayed body
	// past a rate fold into one receipt), the last received at LastReceivedAt; 0 or 1 means one.
	Repeats        int
	LastReceivedAt time.Time
}

// HistoryEvent is one stored event of the booking.
type HistoryEvent struct {
	// Version is the arrival order: the event's version in the booking's stream.
	Version uint64
	// FoldIndex is the event's 1-based position in the order the fold used.
	FoldIndex   int
	ID          eventlog.EventID
	Type        booking.EventType
	Provider    string
	ProviderRef string
	// OccurredAt is the provider's time, RecordedAt the store's.
	OccurredAt time.Time
	RecordedAt time.Time
	Position   eventlog.Position
	// Applied is false when the fold kept the event without effect (see Effect).
	Applied bool
	Effect  string
	Summary string
}

// HistoryFinding is one thing an auditor should notice, with its reason.
type HistoryFinding struct {
	Kind FindingKind
	// Code refines late events (booking.FindingCode).
	Code         string
	Event        eventlog.EventID // zero when the finding is about a receipt
	ReceiptID    int64
	OtherBooking booking.ID
	Reason       string
}

// History is a booking as an auditor reads it.
type History struct {
	Booking booking.ID
	// State is the calendar row; Projected is false when the read model has no row (not projected
	// yet, or a payment-only stream) and State comes from the fold alone.
	State     calendar.Booking
	Projected bool
	Receipts  []ReceiptEntry
	// Events in arrival order (stream version).
	Events []HistoryEvent
	// FoldOrder lists the event IDs in the order the fold applied them (booking.Sorted).
	FoldOrder []eventlog.EventID
	Findings  []HistoryFinding
	// Steps are the process steps of the booking's thread (the booking and those rescheduled from or
	// to it), oldest first: what bookingledger did about it. Empty when none were planned.
	Steps []StepEntry
}

// StepEntry is one process step (adapters/process): an effect on a target with its own idempotency key.
type StepEntry struct {
	Key         string
	Kind        string
	State       string
	Booking     string
	Answers     string // the booking state the step answers
	Attempts    int
	CreatedAt   time.Time
	RequestedAt time.Time // zero until requested
	FinishedAt  time.Time // zero until done, failed, skipped or needing reconciliation
	UpdatedAt   time.Time
	LastError   string
	Note        string
}

// HistoryInput is what a history is computed from.
type HistoryInput struct {
	Booking booking.ID
	// Recorded are the stream's stored events and Events the same events decoded, any order.
	Recorded []eventlog.RecordedEvent
	Events   []booking.Event
	Receipts []ReceiptEntry
	// Row is the read model's calendar row, nil when it has none.
	Row *calendar.Booking
	// Items are the reconciliation items naming the booking, open and closed.
	Items []calendar.Item
	// Texts are the free texts kept apart from the booking's events (cancel reasons), put back in
	// place for the auditor; an erased one reads "[erased on …]".
	Texts []KeptText
}

// KeptText is a free text kept apart from its event (booking.SplitFreeText), or the record that it
// was erased.
type KeptText struct {
	booking.FreeText
	ErasedAt time.Time // zero while the text is kept
}

// Shown is the text as a reader sees it: the text, or when it was erased.
func (k KeptText) Shown() booking.FreeText {
	if !k.ErasedAt.IsZero() {
		k.Text = ErasedMark(k.ErasedAt)
	}
	return k.FreeText
}

// ErasedMark stands in for personal data erased at t, wherever the data used to be shown.
func ErasedMark(t time.Time) string { return "[erased on " + t.UTC().Format(time.DateOnly) + "]" }

// BuildHistory computes a booking's history. Receipts keep their given order; events are put in
// arrival order.
func BuildHistory(in HistoryInput) History {
	recOf := make(map[eventlog.EventID]eventlog.RecordedEvent, len(in.Recorded))
	for _, rec := range in.Recorded {
		recOf[rec.ID] = rec
	}
	events := slices.Clone(in.Events)
	slices.SortStableFunc(events, func(a, b booking.Event) int { return cmp.Compare(recOf[a.ID].Version, recOf[b.ID].Version) })
	for _, k := range in.Texts {
		for i := range events {
			if events[i].ID == k.Event {
				events[i] = booking.WithFreeText(events[i], k.Shown())
			}
		}
	}
	h := History{Booking: in.Booking, Receipts: slices.Clone(in.Receipts)}
	sorted := booking.Sorted(events)
	foldIndex := make(map[eventlog.EventID]int, len(sorted))
	for i, e := range sorted {
		foldIndex[e.ID] = i + 1
		h.FoldOrder = append(h.FoldOrder, e.ID)
	}
	state := booking.Fold(events)
	foldFindings := map[eventlog.EventID]booking.Finding{}
	for _, f := range state.Findings {
		foldFindings[f.Event] = f
	}
	if in.Row != nil {
		h.State, h.Projected = *in.Row, true
		if state.CancelReason != "" {
			// The row is folded from the events alone, which keep no free text.
			h.State.CancelReason = state.CancelReason
		}
	} else {
		var version uint64
		if n := len(events); n > 0 {
			version = recOf[events[n-1].ID].Version
		}
		h.State = calendar.BookingRow(calendar.BookingInput{Events: events, StreamVersion: version})
		h.State.Booking = cmp.Or(h.State.Booking, in.Booking)
	}

	for _, ev := range events {
		rec := recOf[ev.ID]
		he := HistoryEvent{
			Version: rec.Version, FoldIndex: foldIndex[ev.ID], ID: ev.ID, Type: ev.Type(),
			Provider: ev.Provider, ProviderRef: ev.ProviderRef, OccurredAt: ev.OccurredAt,
			RecordedAt: rec.RecordedAt, Position: rec.Position, Applied: true, Effect: "applied",
			Summary: summary(ev),
		}
		if f, ok := foldFindings[ev.ID]; ok {
			he.Applied, he.Effect = false, "changed nothing: "+f.Reason
			if f.Code == booking.FindingOverCapacity {
				he.Applied, he.Effect = true, "applied over capacity: "+f.Reason
			}
		}
		h.Events = append(h.Events, he)
	}

	for _, r := range h.Receipts {
		switch r.Outcome {
		case ledger.OutcomeDuplicate:
			var vs []string
			for _, e := range r.Events {
				if e.Booking == in.Booking {
					vs = append(vs, fmt.Sprintf("%s v%d", e.Type, recOf[e.ID].Version))
				}
			}
			received := "received " + stamp(r.ReceivedAt)
			if r.Repeats > 1 {
				received = fmt.Sprintf("received %d times from %s to %s", r.Repeats, stamp(r.ReceivedAt), stamp(r.LastReceivedAt))
			}
			h.Findings = append(h.Findings, HistoryFinding{Kind: FindingDuplicateDelivery, ReceiptID: r.ID,
				Reason: fmt.Sprintf("%s delivery %q %s carried only events already stored (%s); nothing appended",
					r.Provider, r.DeliveryID, received, strings.Join(vs, ", "))})
		case ledger.OutcomeQuarantined:
			h.Findings = append(h.Findings, HistoryFinding{Kind: FindingQuarantined, ReceiptID: r.ID,
				Reason: fmt.Sprintf("%s delivery %q received %s was quarantined: %s", r.Provider, r.DeliveryID, stamp(r.ReceivedAt), r.Reason)})
		}
	}

	// An event is out of order when something that arrived before it, with an earlier delivery, is
	// ordered after it by the fold. Events of one delivery are appended in one commit: they arrive
	// together, whatever order the delivery lists them in (an Acuity delivery's observed slot comes
	// before its creation anchor), so they are never out of order among themselves.
	deliveredBy := map[eventlog.EventID]int64{}
	for _, r := range h.Receipts {
		if r.Outcome != ledger.OutcomeAccepted {
			continue
		}
		for _, e := range r.Events {
			if _, seen := deliveredBy[e.ID]; !seen {
				deliveredBy[e.ID] = r.ID
			}
		}
	}
	together := func(a, b eventlog.EventID) bool {
		ra, oka := deliveredBy[a]
		rb, okb := deliveredBy[b]
		return oka && okb && ra == rb
	}
	for i, e := range h.Events {
		var overtaken []string
		for _, earlier := range h.Events[:i] {
			if earlier.FoldIndex > e.FoldIndex && !together(earlier.ID, e.ID) {
				overtaken = append(overtaken, fmt.Sprintf("%s v%d (provider time %s)", earlier.Type, earlier.Version, stamp(earlier.OccurredAt)))
			}
		}
		if len(overtaken) > 0 {
			h.Findings = append(h.Findings, HistoryFinding{Kind: FindingOutOfOrder, Event: e.ID,
				Reason: fmt.Sprintf("%s v%d (provider time %s) arrived after %s, which the fold orders after it; folded #%d of %d",
					e.Type, e.Version, stamp(e.OccurredAt), strings.Join(overtaken, ", "), e.FoldIndex, len(h.Events))})
		}
	}
	for _, f := range state.Findings {
		verdict := "kept but refused"
		if f.Code == booking.FindingOverCapacity {
			verdict = "applied"
		}
		h.Findings = append(h.Findings, HistoryFinding{Kind: FindingLateEvent, Code: string(f.Code), Event: f.Event,
			Reason: fmt.Sprintf("%s v%d (provider time %s) %s: %s", f.Type, recOf[f.Event].Version, stamp(f.OccurredAt), verdict, f.Reason)})
	}
	for _, it := range in.Items {
		if it.Kind != calendar.ItemConflict {
			continue
		}
		reason := it.Reason
		if !it.Open() {
			reason += fmt.Sprintf(" [closed %s by %s: %s]", stamp(it.ClosedAt), strings.TrimSpace(it.ClosedBy+" "+it.ResolvedBy), it.Note)
		}
		other := it.OtherBooking
		if other == in.Booking {
			other = it.Booking
		}
		h.Findings = append(h.Findings, HistoryFinding{Kind: FindingConflict, OtherBooking: other, Reason: reason})
	}
	return h
}

func summary(e booking.Event) string {
	switch p := e.Payload.(type) {
	case booking.Requested:
		return "requested " + slotText(p.Slot)
	case booking.Scheduled:
		s := "scheduled " + slotText(p.Slot)
		if p.RescheduledFrom != "" {
			s += ", rescheduled from " + string(p.RescheduledFrom)
		}
		if len(p.PaymentRefs) > 0 {
			s += ", payment " + strings.Join(p.PaymentRefs, " ")
		}
		return s
	case booking.Rescheduled:
		return "moved to " + slotText(p.Slot)
	case booking.Canceled:
		s := "canceled"
		if p.CanceledBy != "" {
			s += " by " + p.CanceledBy
		}
		if p.Implied {
			s += " (implied by the provider's reschedule)"
		}
		if p.RescheduledTo != "" {
			s += ", rescheduled to " + string(p.RescheduledTo)
		}
		if p.Reason != "" {
			s += ": " + p.Reason
		}
		return s
	case booking.Rejected:
		return "rejected: " + p.Reason
	case booking.SeatAdded:
		s := fmt.Sprintf("seat %s taken of %d, %s", seatText(p.Seat), p.Capacity, slotText(p.Slot))
		if len(p.PaymentRefs) > 0 {
			s += ", payment " + strings.Join(p.PaymentRefs, " ")
		}
		return s
	case booking.SeatRemoved:
		s := "seat " + seatText(p.Seat) + " left"
		if p.Reason != "" {
			s += ": " + p.Reason
		}
		return s
	case booking.SeriesJoined:
		return "occurrence of series " + p.Series
	case booking.SeriesCanceled:
		s := "canceled with the series"
		if p.Series != "" {
			s += " " + p.Series
		}
		if p.CanceledBy != "" {
			s += " by " + p.CanceledBy
		}
		return s + ": every occurrence starting at or after " + stamp(e.OccurredAt)
	case booking.NoShowMarked:
		return "no-show marked"
	case booking.NoShowCleared:
		return "no-show cleared"
	case booking.MeetingStarted:
		return "meeting started"
	case booking.MeetingEnded:
		return "meeting ended"
	case booking.PaymentSucceeded:
		return fmt.Sprintf("payment succeeded %d %s (%s)", p.Amount, p.Currency, strings.Join(p.Refs, " "))
	case booking.PaymentFailed:
		return fmt.Sprintf("payment failed (%s): %s", strings.Join(p.Refs, " "), p.Reason)
	case booking.PaymentRefunded:
		return fmt.Sprintf("payment refunded %d %s (%s)", p.Amount, p.Currency, strings.Join(p.Refs, " "))
	case booking.PaymentDisputed:
		return fmt.Sprintf("payment disputed (%s): %s", strings.Join(p.Refs, " "), p.Reason)
	}
	return string(e.Type())
}

// seatText names a seat by its reference, else by its attendee key (a digest, never an address).
func seatText(s booking.Seat) string {
	return cmp.Or(s.UID, s.Attendee, "unknown")
}

func slotText(s booking.Slot) string {
	return fmt.Sprintf("%s on %s (meeting %s)", span(s.Start, s.End), strings.Join(s.Resources, ", "), s.Meeting)
}

// ReceiptQuery selects receipts for operators (quarantined and deferred deliveries, rejections);
// empty fields match everything, Limit bounds the answer (newest first).
type ReceiptQuery struct {
	Outcome  ledger.Outcome
	Provider string
	Limit    int
}

// ReceiptDetail is one receipt as an operator inspects it: the entry, the request headers and the
// verified body kept with it (no body for rejected requests), the booking a deferred receipt waits
// for, and the other receipts of the same delivery — what it became (the receipt that finished a
// deferral, a redelivery's copies).
type ReceiptDetail struct {
	ReceiptEntry
	RecordedAt time.Time
	Headers    []ledger.Header
	Body       []byte
	// BodyNote says why a verified delivery's Body is missing: "[erased on …]", or that it is sealed
	// and the reader has no master key.
	BodyNote string
	Pending  booking.ID
	Related  []ReceiptEntry
}
