package projections

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"bookingledger/domain/booking"
)

// Sentinel errors of the read side. Handlers map them to HTTP statuses, the CLI to exit messages.
var (
	// ErrNotFound: no booking or reconciliation item of that id.
	ErrNotFound = errors.New("not found")
	// ErrItemClosed: the reconciliation item is closed already.
	ErrItemClosed = errors.New("reconciliation item already closed")
	// ErrInvalidQuery: a query parameter is missing or out of range.
	ErrInvalidQuery = errors.New("invalid query")
	// ErrBusy: another process runs the projection (holds its lock), so this one cannot rebuild it.
	ErrBusy = errors.New("projection is run by another process")
)

// Status is a booking's status in the calendar.
type Status string

const (
	// StatusPending: the stream has events, but none requested or scheduled the booking yet (for
	// example only a no-show flag arrived). No slot is known.
	StatusPending Status = "pending"
	// StatusRequested: awaiting the host's confirmation. A requested booking does not hold its slot:
	// the host may reject it, and holding would put confirmed bookings in conflict with a request.
	StatusRequested Status = "requested"
	// StatusActive: confirmed and holding its slot.
	StatusActive Status = "active"
	// StatusConflict: confirmed at the provider, but its slot overlaps a holder of another meeting that
	// wins the slot-holder rule; it has an open reconciliation item and takes the slot when the holder
	// goes away.
	StatusConflict Status = "conflict"
	// StatusCanceled: canceled at the provider, or superseded by a booking rescheduled from it.
	StatusCanceled Status = "canceled"
	// StatusRejected: the host declined the request.
	StatusRejected Status = "rejected"
)

// Booking is one booking's calendar row.
type Booking struct {
	Booking   booking.ID
	Provider  string
	Meeting   string
	Resources []string
	// Start and End are zero when no slot is known.
	Start, End time.Time
	Status     Status
	// BookingStatus is the booking's own fold status, before the slot assignment and reschedule links.
	BookingStatus booking.Status
	// Holder is true when the booking holds its slot (Status is active).
	Holder bool
	// Payment folds the booking's payment events with those of every linked payment stream.
	Payment        booking.PaymentStatus
	PaymentRefs    []string
	PaymentStreams []booking.ID
	Capacity       int
	NoShow         bool
	// ScheduledAt and UpdatedAt are provider times: the first request or schedule, and the last event.
	ScheduledAt time.Time
	UpdatedAt   time.Time
	// StreamVersion is the version of the booking's stream when the row was computed; Events counts
	// its distinct events.
	StreamVersion   uint64
	Events          int
	RescheduledFrom booking.ID
	RescheduledTo   booking.ID
	CancelReason    string
	CanceledBy      string
	CancelImplied   bool
	Findings        []booking.Finding
}

// HasSlot reports whether a slot is known.
func (b Booking) HasSlot() bool { return !b.Start.IsZero() }

// Claims reports whether the booking wants its slot, i.e. takes part in the slot-holder rule.
func (b Booking) Claims() bool {
	return b.BookingStatus == booking.StatusActive && b.Status != StatusCanceled && b.HasSlot()
}

// LinkedPayment is a payment stream's contribution to a booking's payment status.
type LinkedPayment struct {
	Stream booking.ID
	Events []booking.Event
}

// BookingInput is everything a booking's calendar row is computed from.
type BookingInput struct {
	// Events are the booking's own events, any order, duplicates allowed.
	Events []booking.Event
	// StreamVersion is the version of the stream the events were read from.
	StreamVersion uint64
	// Payments are the payment streams linked to the booking (see LinkPayments).
	Payments []LinkedPayment
	// SupersededBy lists bookings whose own events say they were rescheduled from this one.
	SupersededBy []booking.ID
}

// BookingRow computes a booking's calendar row before the slot assignment: a booking that claims its
// slot comes back active and not holding; AssignSlots decides holder or conflict. The row depends
// only on the sets in the input, never on their order.
func BookingRow(in BookingInput) Booking {
	s := booking.Fold(in.Events)
	b := Booking{
		Booking:         s.Booking,
		Provider:        s.Provider,
		BookingStatus:   s.Status,
		Capacity:        s.Capacity,
		NoShow:          s.NoShow,
		ScheduledAt:     s.ScheduledAt,
		UpdatedAt:       s.UpdatedAt,
		StreamVersion:   in.StreamVersion,
		Events:          s.Events,
		RescheduledFrom: s.RescheduledFrom,
		RescheduledTo:   s.RescheduledTo,
		CancelReason:    s.CancelReason,
		CanceledBy:      s.CanceledBy,
		CancelImplied:   s.CancelImplied,
		Findings:        slices.Clone(s.Findings),
	}
	if s.HasSlot() {
		b.Meeting = s.Slot.Meeting
		b.Resources = slices.Clone(s.Slot.Resources)
		slices.Sort(b.Resources)
		b.Resources = slices.Compact(b.Resources)
		b.Start, b.End = s.Slot.Start.UTC(), s.Slot.End.UTC()
	}

	payEvents := slices.Clone(in.Events)
	for _, p := range in.Payments {
		b.PaymentStreams = append(b.PaymentStreams, p.Stream)
		payEvents = append(payEvents, PaymentEvents(p.Events)...)
	}
	slices.Sort(b.PaymentStreams)
	b.PaymentStreams = slices.Compact(b.PaymentStreams)
	ps := booking.Fold(PaymentEvents(payEvents))
	b.Payment = ps.Payment
	b.PaymentRefs = mergeSorted(s.PaymentRefs, ps.PaymentRefs)

	switch s.Status {
	case booking.StatusNone:
		b.Status = StatusPending
	case booking.StatusRequested:
		b.Status = StatusRequested
	case booking.StatusActive:
		b.Status = StatusActive
	case booking.StatusCanceled:
		b.Status = StatusCanceled
	case booking.StatusRejected:
		b.Status = StatusRejected
	}
	if len(in.SupersededBy) > 0 {
		by := slices.Min(in.SupersededBy)
		if b.RescheduledTo == "" {
			b.RescheduledTo = by
		}
		// Calendly sends the old invitee's cancel and the new invitee's create in no documented
		// order. The new booking's own event already says the old one is gone, so the old slot is
		// released now rather than when the cancel arrives; the cancel then changes nothing here.
		if s.Status == booking.StatusActive || s.Status == booking.StatusRequested {
			b.Status = StatusCanceled
			b.CanceledBy = "provider"
			b.CancelImplied = true
			b.CancelReason = "rescheduled to " + string(by) + " (implied by its create; the provider's cancel has not arrived)"
		}
	}
	return b
}

// IsPaymentOnly reports whether a stream's events are all payment events: such a stream is a payment
// (Stripe without a booking reference), not a calendar booking.
func IsPaymentOnly(events []booking.Event) bool {
	if len(events) == 0 {
		return false
	}
	for _, e := range events {
		if !IsPaymentEvent(e) {
			return false
		}
	}
	return true
}

// IsPaymentEvent reports whether e is one of the payment events.
func IsPaymentEvent(e booking.Event) bool {
	switch e.Payload.(type) {
	case booking.PaymentSucceeded, booking.PaymentFailed, booking.PaymentRefunded, booking.PaymentDisputed:
		return true
	}
	return false
}

// PaymentEvents returns the payment events of events.
func PaymentEvents(events []booking.Event) []booking.Event {
	out := make([]booking.Event, 0, len(events))
	for _, e := range events {
		if IsPaymentEvent(e) {
			out = append(out, e)
		}
	}
	return out
}

// PaymentStream is a payment-only stream as the linker sees it.
type PaymentStream struct {
	Stream booking.ID
	Refs   []string
}

// LinkPayments returns the payment streams linked to a booking with payment references refs: every
// stream sharing a reference, transitively (a stream links the refs it carries to the booking too).
// The result is sorted and depends only on the sets given.
func LinkPayments(refs []string, streams []PaymentStream) (linked []booking.ID, closure []string) {
	have := map[string]bool{}
	for _, r := range refs {
		have[r] = true
	}
	taken := map[booking.ID]bool{}
	for changed := true; changed; {
		changed = false
		for _, ps := range streams {
			if taken[ps.Stream] || !slices.ContainsFunc(ps.Refs, func(r string) bool { return have[r] }) {
				continue
			}
			taken[ps.Stream] = true
			changed = true
			for _, r := range ps.Refs {
				have[r] = true
			}
		}
	}
	for id := range taken {
		linked = append(linked, id)
	}
	for r := range have {
		closure = append(closure, r)
	}
	slices.Sort(linked)
	slices.Sort(closure)
	return linked, closure
}

func mergeSorted(a, b []string) []string {
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// Claim is one (booking, resource) row of the slot-holder rule.
type Claim struct {
	Booking  booking.ID
	Resource string
	Meeting  string
	Start    time.Time
	End      time.Time
	// Priority is the booking's provider scheduled-at time.
	Priority time.Time
}

func (c Claim) overlaps(o Claim) bool {
	return c.Resource == o.Resource && c.Start.Before(o.End) && o.Start.Before(c.End)
}

// Conflict says that Booking lost its slot to Holder on Resources.
type Conflict struct {
	Booking   booking.ID
	Holder    booking.ID
	Resources []string
}

// Assignment is the outcome of the slot-holder rule.
type Assignment struct {
	Holders   map[booking.ID]bool
	Conflicts []Conflict // sorted by booking, then holder
}

// AssignSlots applies the slot-holder rule to a set of claims: bookings are taken in order of
// (earliest provider scheduled-at, booking id); a booking holds its slot when none of its resources
// already has an overlapping holder of another meeting, and otherwise conflicts with every such
// holder. Invitees of one meeting never block each other. A booking holds all its resources or none.
// The result depends only on the set of claims.
func AssignSlots(claims []Claim) Assignment {
	byBooking := map[booking.ID][]Claim{}
	for _, c := range claims {
		byBooking[c.Booking] = append(byBooking[c.Booking], c)
	}
	order := make([]booking.ID, 0, len(byBooking))
	for id := range byBooking {
		order = append(order, id)
	}
	priority := func(id booking.ID) time.Time {
		p := byBooking[id][0].Priority
		for _, c := range byBooking[id][1:] {
			if c.Priority.Before(p) {
				p = c.Priority
			}
		}
		return p
	}
	slices.SortFunc(order, func(a, b booking.ID) int {
		if c := priority(a).Compare(priority(b)); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})

	out := Assignment{Holders: map[booking.ID]bool{}}
	held := map[string][]Claim{} // resource -> claims of holders
	blocked := func(id booking.ID) bool {
		for _, c := range byBooking[id] {
			for _, h := range held[c.Resource] {
				if h.Meeting != c.Meeting && c.overlaps(h) {
					return true
				}
			}
		}
		return false
	}
	for _, id := range order {
		if blocked(id) {
			continue
		}
		out.Holders[id] = true
		for _, c := range byBooking[id] {
			held[c.Resource] = append(held[c.Resource], c)
		}
	}
	// A conflict names every holder overlapping the booking, not only those ranked before it: the
	// pairs are then a property of the final assignment alone, which SQL can recompute as well.
	for _, id := range order {
		if out.Holders[id] {
			continue
		}
		blockers := map[booking.ID][]string{}
		for _, c := range byBooking[id] {
			for _, h := range held[c.Resource] {
				if h.Meeting != c.Meeting && c.overlaps(h) && !slices.Contains(blockers[h.Booking], c.Resource) {
					blockers[h.Booking] = append(blockers[h.Booking], c.Resource)
				}
			}
		}
		for h, res := range blockers {
			slices.Sort(res)
			out.Conflicts = append(out.Conflicts, Conflict{Booking: id, Holder: h, Resources: res})
		}
	}
	slices.SortFunc(out.Conflicts, func(a, b Conflict) int {
		if c := cmp.Compare(a.Booking, b.Booking); c != 0 {
			return c
		}
		return cmp.Compare(a.Holder, b.Holder)
	})
	return out
}

// CalendarQuery selects calendar entries overlapping [From, To), optionally of one resource.
type CalendarQuery struct {
	From, To time.Time
	Resource string
}

// MaxCalendarWindow bounds a calendar query, so one request cannot read the whole table.
const MaxCalendarWindow = 366 * 24 * time.Hour

// Validate checks the query's shape.
func (q CalendarQuery) Validate() error {
	switch {
	case q.From.IsZero() || q.To.IsZero():
		return fmt.Errorf("%w: from and to are required", ErrInvalidQuery)
	case !q.To.After(q.From):
		return fmt.Errorf("%w: to must be after from", ErrInvalidQuery)
	case q.To.Sub(q.From) > MaxCalendarWindow:
		return fmt.Errorf("%w: window longer than 366 days", ErrInvalidQuery)
	}
	return nil
}

// CalendarEntry is one booking on one resource.
type CalendarEntry struct {
	Booking  booking.ID
	Provider string
	Meeting  string
	Resource string
	Start    time.Time
	End      time.Time
	Status   Status
}
