package calendar

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
)

// ItemKind classifies a reconciliation item.
type ItemKind string

const (
	// ItemConflict: a booking confirmed at the provider lost its slot to a holder of another meeting.
	ItemConflict ItemKind = "conflict"
	// ItemQuarantined: a verified delivery could not be mapped or validated (receipt outcome
	// quarantined); the provider was acked and nothing was appended.
	ItemQuarantined ItemKind = "quarantined"
	// ItemLateEvent: an event was kept in its stream but changed nothing (a create after its cancel,
	// a request after the confirmation): a fold finding.
	ItemLateEvent ItemKind = "late_event"
	// ItemStep: a process step whose outcome is unknown (adapters/process); subject "step <key>". It is
	// closed together with its step, by an operator's action.
	ItemStep ItemKind = "step"
	// ItemSync: the provider sync or the subscription watch found something an operator must act on (a
	// run that failed, a webhook subscription disabled or missing at the provider); subject
	// "<provider> sync" or "<provider> subscription". Closed by an operator, or automatically when the
	// next run or check succeeds.
	ItemSync ItemKind = "sync"
)

// Closers of an item.
const (
	ClosedByOperator = "operator"
	ClosedByAuto     = "auto"
)

// ItemKinds and Closers list every item kind and closer: reconciliation_items' CHECK lists (a test
// compares them).
var (
	ItemKinds = []ItemKind{ItemConflict, ItemQuarantined, ItemLateEvent, ItemStep, ItemSync}
	Closers   = []string{ClosedByOperator, ClosedByAuto}
)

// Item is one entry of the reconciliation queue.
type Item struct {
	ID   int64
	Kind ItemKind
	// Subject identifies the cause deterministically (see conflictItem, lateEventItem,
	// QuarantineItem): an item closed by an operator is never reopened for the same subject.
	Subject      string
	Booking      booking.ID
	OtherBooking booking.ID
	EventID      eventlog.EventID // zero when none
	ReceiptID    int64            // 0 when none
	Reason       string
	OpenedAt     time.Time
	ClosedAt     time.Time // zero while open
	ClosedBy     string    // ClosedByOperator or ClosedByAuto
	Note         string    // resolution or automatic closing note
	ResolvedBy   string    // who closed it when an operator did: a token's name or the CLI's user
}

// Open reports whether the item is open.
func (it Item) Open() bool { return it.ClosedAt.IsZero() }

// DesiredItem is an item the current read model calls for.
type DesiredItem struct {
	Kind         ItemKind
	Subject      string
	Booking      booking.ID
	OtherBooking booking.ID
	EventID      eventlog.EventID
	ReceiptID    int64
	Reason       string
}

// itemKey identifies an item's cause.
type itemKey struct {
	Kind    ItemKind
	Subject string
}

func (d DesiredItem) key() itemKey { return itemKey{Kind: d.Kind, Subject: d.Subject} }

func (it Item) key() itemKey { return itemKey{Kind: it.Kind, Subject: it.Subject} }

// conflictItem is the item of booking loser losing its slot to holder. The reason names the rule
// that decided: a holder ranked after the loser holds because the loser lost to another one.
func conflictItem(c conflict, loser, holder Booking) DesiredItem {
	rule := "earlier provider scheduled-at"
	switch later := holder.ScheduledAt.Compare(loser.ScheduledAt); {
	case later > 0 || later == 0 && naturalCompare(string(holder.Booking), string(loser.Booking)) > 0: // holds only because loser lost first
		rule = "ranked after " + string(loser.Booking) + ", which lost to an earlier holder"
	case later == 0:
		rule = "same scheduled-at, smaller booking id"
	}
	reason := fmt.Sprintf("%s (%s, scheduled at %s) overlaps %s (%s, scheduled at %s) on %s: %s holds the slot (%s)",
		loser.Booking, span(loser.Start, loser.End), stamp(loser.ScheduledAt),
		holder.Booking, span(holder.Start, holder.End), stamp(holder.ScheduledAt),
		strings.Join(c.Resources, ", "), holder.Booking, rule)
	return DesiredItem{
		Kind: ItemConflict, Subject: string(c.Booking) + " " + string(c.Holder),
		Booking: c.Booking, OtherBooking: c.Holder, Reason: reason,
	}
}

// lateEventItem is the item of a fold finding of booking b.
func lateEventItem(b booking.ID, f booking.Finding) DesiredItem {
	return DesiredItem{
		Kind: ItemLateEvent, Subject: string(b) + " " + f.Event.String(), Booking: b, EventID: f.Event,
		Reason: fmt.Sprintf("%s (%s): %s", f.Type, f.Code, f.Reason),
	}
}

// QuarantineItem is the item of a quarantined receipt.
func QuarantineItem(receiptID int64, provider, deliveryID, reason string, b booking.ID) DesiredItem {
	return DesiredItem{
		Kind: ItemQuarantined, Subject: "receipt " + strconv.FormatInt(receiptID, 10), Booking: b, ReceiptID: receiptID,
		Reason: fmt.Sprintf("%s delivery %q quarantined: %s", provider, deliveryID, reason),
	}
}

// autoCloseNote says why an item closed by itself, from the current rows of its booking and other
// booking (nil when the read model has none).
func autoCloseNote(it Item, b, other *Booking) string {
	switch it.Kind {
	case ItemConflict:
		switch {
		case b == nil || !b.Claims():
			return fmt.Sprintf("closed automatically: %s is %s now%s", it.Booking, statusOf(b), becauseOf(b))
		case other == nil || !other.Holder:
			if b.Holder {
				return fmt.Sprintf("closed automatically: holder %s is %s now%s; %s holds the slot", it.OtherBooking, statusOf(other), becauseOf(other), it.Booking)
			}
			return fmt.Sprintf("closed automatically: holder %s is %s now%s; %s still conflicts with another holder", it.OtherBooking, statusOf(other), becauseOf(other), it.Booking)
		case b.Holder:
			return fmt.Sprintf("closed automatically: %s holds the slot now", it.Booking)
		default:
			return fmt.Sprintf("closed automatically: %s no longer overlaps %s", it.OtherBooking, it.Booking)
		}
	case ItemLateEvent:
		return "closed automatically: the event takes effect now (an event that arrived later reordered the fold)"
	}
	return "closed automatically"
}

func statusOf(b *Booking) string {
	if b == nil {
		return "gone from the calendar"
	}
	if b.Status == StatusActive && !b.Holder {
		return "active without slot"
	}
	return string(b.Status)
}

func becauseOf(b *Booking) string {
	if b == nil || b.CancelReason == "" || (b.Status != StatusCanceled && b.Status != StatusRejected) {
		return ""
	}
	return " (" + b.CancelReason + ")"
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format(time.RFC3339)
}

func span(start, end time.Time) string {
	if start.IsZero() {
		return "no slot"
	}
	return start.UTC().Format(time.RFC3339) + "–" + end.UTC().Format(time.RFC3339)
}
