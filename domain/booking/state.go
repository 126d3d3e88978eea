package booking

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"bookingledger/domain/eventlog"
)

// Sentinel errors of Decide. A delivery whose event fails them is kept as quarantined, never appended.
var (
	ErrInvalidEvent = errors.New("invalid booking event")
	ErrInvalidSlot  = errors.New("invalid slot")
	ErrWrongBooking = errors.New("event belongs to another booking")
)

// Status of a booking.
type Status string

const (
	StatusNone      Status = ""          // nothing but payments or notes known yet
	StatusRequested Status = "requested" // awaiting the host's confirmation
	StatusActive    Status = "active"
	StatusCanceled  Status = "canceled" // terminal
	StatusRejected  Status = "rejected" // terminal
)

// Terminal reports whether no later event can change the booking's slot or status.
func (s Status) Terminal() bool { return s == StatusCanceled || s == StatusRejected }

// PaymentStatus summarises the payment events of a booking.
type PaymentStatus string

const (
	PaymentIsNone     PaymentStatus = ""
	PaymentIsFailed   PaymentStatus = "failed"
	PaymentIsPaid     PaymentStatus = "paid"
	PaymentIsRefunded PaymentStatus = "refunded"
	PaymentIsDisputed PaymentStatus = "disputed"
)

// PaymentStatuses lists every payment status: calendar_bookings.payment_status's CHECK list (a test
// compares them).
var PaymentStatuses = []PaymentStatus{PaymentIsNone, PaymentIsFailed, PaymentIsPaid, PaymentIsRefunded, PaymentIsDisputed}

// FindingCode classifies why an event changed nothing.
type FindingCode string

const (
	// FindingAfterTerminal: the event is ordered after a cancel or reject; canceled is terminal.
	FindingAfterTerminal FindingCode = "after_terminal"
	// FindingSuperseded: the event is ordered after a state it cannot apply to (a request after the
	// booking was confirmed).
	FindingSuperseded FindingCode = "superseded"
	// FindingOverCapacity: a seat was added beyond the slot's capacity. The seat is kept (the provider
	// booked it); the finding says so.
	FindingOverCapacity FindingCode = "over_capacity"
	// FindingUnknownSeat: a seat removal named no attendee the booking has; it changed nothing.
	FindingUnknownSeat FindingCode = "unknown_seat"
	// FindingSeriesUnknown: a cancel of the remaining occurrences of a series, on a booking no event
	// of which names its series: which occurrences are meant is unknown, so none but this one is
	// canceled.
	FindingSeriesUnknown FindingCode = "series_unknown"
)

// Finding records an event that was kept in the stream but changed nothing, and why; or, for
// FindingOverCapacity, an event that took effect beyond a limit.
type Finding struct {
	Event      eventlog.EventID
	Type       EventType
	OccurredAt time.Time
	Code       FindingCode
	Reason     string
}

// State is a booking as its events say it is.
type State struct {
	Booking  ID
	Provider string
	Status   Status
	Slot     Slot
	Capacity int
	// ScheduledAt is the provider time of the first event that requested or scheduled the booking; the
	// calendar's slot-holder rule uses it.
	ScheduledAt     time.Time
	UpdatedAt       time.Time // provider time of the last event folded
	RescheduledFrom ID
	RescheduledTo   ID
	CancelReason    string
	CanceledBy      string
	CancelImplied   bool
	NoShow          bool
	// Seats are the attendees holding a seat now, in fold order; a seated booking's Scheduled events
	// (recorded before seats had events of their own) count as seats known only by number (zero Seat).
	Seats []Seat
	// Left are the seats that left (each a seat removal the fold took: its own Seat, in fold order).
	// What each leaver is told follows from them, whatever order the events arrived in.
	Left []Seat
	// Seated is true once a seat event was folded: the booking is a slot with attendees.
	Seated bool
	// Series is the recurring series the booking is an occurrence of; SeriesCanceledAt the provider
	// time of a cancel of this booking that canceled the remaining occurrences too.
	Series           string
	SeriesCanceledAt time.Time
	SeriesCanceledBy string
	Payment          PaymentStatus
	PaymentRefs      []string
	// Events counts the distinct events folded; Order lists their IDs in fold order.
	Events   int
	Order    []eventlog.EventID
	Findings []Finding
}

// HasSlot reports whether a slot is known.
func (s State) HasSlot() bool { return !s.Slot.Start.IsZero() }

// Evolve applies one event. It never fails: an event that cannot change the booking is recorded as a
// finding with the reason.
func Evolve(s State, e Event) State {
	if s.Booking == "" {
		s.Booking = e.Booking
	}
	if s.Provider == "" {
		s.Provider = e.Provider
	}
	s.Events++
	s.Order = append(slices.Clip(s.Order), e.ID)
	if e.OccurredAt.After(s.UpdatedAt) {
		s.UpdatedAt = e.OccurredAt
	}
	note := func(code FindingCode, format string, args ...any) State {
		s.Findings = append(slices.Clip(s.Findings), Finding{
			Event: e.ID, Type: e.Type(), OccurredAt: e.OccurredAt, Code: code, Reason: fmt.Sprintf(format, args...),
		})
		return s
	}
	terminal := func() State {
		return note(FindingAfterTerminal, "%s at %s ignored: booking was already %s (terminal)",
			e.Type(), e.OccurredAt.UTC().Format(time.RFC3339Nano), s.Status)
	}

	switch p := e.Payload.(type) {
	case Requested:
		switch {
		case s.Status.Terminal():
			return terminal()
		case s.Status == StatusActive:
			return note(FindingSuperseded, "request ignored: booking already confirmed")
		}
		s.Status = StatusRequested
		s.Slot = cloneSlot(p.Slot)
		s.Capacity = p.Capacity
		s.markScheduled(e.OccurredAt)
	case Scheduled:
		if s.Status.Terminal() {
			return terminal()
		}
		s.Status = StatusActive
		s.Slot = cloneSlot(p.Slot)
		s.Capacity = p.Capacity
		if p.RescheduledFrom != "" {
			s.RescheduledFrom = p.RescheduledFrom
		}
		s.PaymentRefs = mergeRefs(s.PaymentRefs, p.PaymentRefs)
		s.markScheduled(e.OccurredAt)
		if p.Capacity > 1 {
			s.Seats = append(slices.Clip(s.Seats), Seat{})
		}
	case SeatAdded:
		if s.Status.Terminal() {
			return terminal()
		}
		s.Status = StatusActive
		s.Seated = true
		s.Slot = cloneSlot(p.Slot)
		s.Capacity = p.Capacity
		s.PaymentRefs = mergeRefs(s.PaymentRefs, p.PaymentRefs)
		s.markScheduled(e.OccurredAt)
		if slices.ContainsFunc(s.Seats, p.Seat.Same) {
			return note(FindingSuperseded, "seat already taken by the same attendee: nothing added")
		}
		s.Seats = append(slices.Clip(s.Seats), p.Seat)
		if s.Capacity > 0 && len(s.Seats) > s.Capacity {
			return note(FindingOverCapacity, "seat %d of capacity %d: the slot is over capacity (the slot is still held once)", len(s.Seats), s.Capacity)
		}
	case SeatRemoved:
		if s.Status.Terminal() {
			return note(FindingAfterTerminal, "seat removal at %s changed nothing: booking was already %s",
				e.OccurredAt.UTC().Format(time.RFC3339Nano), s.Status)
		}
		s.Seated = true
		i := slices.IndexFunc(s.Seats, p.Seat.Same)
		if i < 0 {
			// A seat known only by number (an older Scheduled event) is the one that left.
			i = slices.IndexFunc(s.Seats, Seat.IsZero)
		}
		if i < 0 {
			return note(FindingUnknownSeat, "seat removal matched no attendee of the booking (%d seats taken): nothing removed", len(s.Seats))
		}
		s.Left = append(slices.Clip(s.Left), p.Seat)
		if s.Seats = slices.Delete(slices.Clone(s.Seats), i, i+1); len(s.Seats) == 0 {
			s.Seats = nil
		}
		if len(s.Seats) == 0 && s.Status == StatusActive {
			s.Status = StatusCanceled
			s.CancelReason = cmp.Or(p.Reason, "the last attendee left")
			s.CanceledBy = "invitee"
		}
	case SeriesJoined:
		// A link, whatever the booking's status: a canceled occurrence still belongs to its series.
		if s.Series == "" || p.Series < s.Series {
			s.Series = p.Series
		}
	case SeriesCanceled:
		if p.Series != "" && (s.Series == "" || p.Series < s.Series) {
			s.Series = p.Series
		}
		if s.SeriesCanceledAt.IsZero() || e.OccurredAt.Before(s.SeriesCanceledAt) {
			s.SeriesCanceledAt, s.SeriesCanceledBy = e.OccurredAt, p.CanceledBy
		}
		if s.Series == "" {
			return note(FindingSeriesUnknown, "all remaining occurrences canceled, but no event of this booking names its series: "+
				"which occurrences are meant is unknown, so only this one is canceled (check them at the provider)")
		}
	case Rescheduled:
		if s.Status.Terminal() {
			return terminal()
		}
		if s.Status == StatusNone {
			s.Status = StatusActive
			s.markScheduled(e.OccurredAt)
		}
		s.Slot = cloneSlot(p.Slot)
	case Canceled:
		if s.Status.Terminal() {
			return note(FindingAfterTerminal, "cancel at %s changed nothing: booking was already %s",
				e.OccurredAt.UTC().Format(time.RFC3339Nano), s.Status)
		}
		s.Status = StatusCanceled
		s.CancelReason = p.Reason
		s.CanceledBy = p.CanceledBy
		s.CancelImplied = p.Implied
		if p.RescheduledTo != "" {
			s.RescheduledTo = p.RescheduledTo
		}
	case Rejected:
		if s.Status.Terminal() {
			return terminal()
		}
		s.Status = StatusRejected
		s.CancelReason = p.Reason
	case NoShowMarked:
		if s.Status.Terminal() {
			return terminal()
		}
		s.NoShow = true
	case NoShowCleared:
		if s.Status.Terminal() {
			return terminal()
		}
		s.NoShow = false
	case MeetingStarted, MeetingEnded:
		// Informational: kept in history, no state change.
	case PaymentSucceeded:
		// Payments apply whatever the booking's status: a refund after a cancel is normal.
		s.PaymentRefs = mergeRefs(s.PaymentRefs, p.Refs)
		if s.Payment != PaymentIsRefunded && s.Payment != PaymentIsDisputed {
			s.Payment = PaymentIsPaid
		}
	case PaymentFailed:
		s.PaymentRefs = mergeRefs(s.PaymentRefs, p.Refs)
		if s.Payment == PaymentIsNone {
			s.Payment = PaymentIsFailed
		}
	case PaymentRefunded:
		s.PaymentRefs = mergeRefs(s.PaymentRefs, p.Refs)
		if s.Payment != PaymentIsDisputed {
			s.Payment = PaymentIsRefunded
		}
	case PaymentDisputed:
		s.PaymentRefs = mergeRefs(s.PaymentRefs, p.Refs)
		s.Payment = PaymentIsDisputed
	default:
		return note(FindingSuperseded, "unknown event type %q kept, not applied", e.Type())
	}
	return s
}

func (s *State) markScheduled(at time.Time) {
	if s.ScheduledAt.IsZero() || at.Before(s.ScheduledAt) {
		s.ScheduledAt = at
	}
}

func cloneSlot(sl Slot) Slot {
	sl.Resources = slices.Clone(sl.Resources)
	return sl
}

func mergeRefs(have, add []string) []string {
	out := slices.Clone(have)
	for _, r := range add {
		if r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out
}

// Sorted returns the distinct events (by ID, first copy kept) in fold order.
func Sorted(events []Event) []Event {
	out := make([]Event, 0, len(events))
	if len(events) <= smallSet {
		// A booking has a few events: a scan finds duplicates without a map's allocations.
		for _, e := range events {
			if !slices.ContainsFunc(out, func(o Event) bool { return o.ID == e.ID }) {
				out = append(out, e)
			}
		}
	} else {
		seen := make(map[eventlog.EventID]struct{}, len(events))
		for _, e := range events {
			if _, dup := seen[e.ID]; dup {
				continue
			}
			seen[e.ID] = struct{}{}
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, Compare)
	return out
}

// smallSet is the number of events up to which Sorted finds duplicates by scanning.
const smallSet = 16

// Fold computes a booking's state from its events in any order and with any duplicates.
func Fold(events []Event) State {
	var s State
	for _, e := range Sorted(events) {
		s = Evolve(s, e)
	}
	return s
}

// Decide validates an event recorded for the booking in state s and returns what to append. A valid
// event is always kept, even one that will change nothing (a create after its cancel): it happened,
// and the fold reports it as a finding.
func Decide(s State, e Event) ([]Event, error) {
	if err := e.Booking.Validate(); err != nil {
		return nil, err
	}
	if s.Booking != "" && s.Booking != e.Booking {
		return nil, fmt.Errorf("%w: %s recorded on %s", ErrWrongBooking, e.Booking, s.Booking)
	}
	if e.ID.IsZero() {
		return nil, fmt.Errorf("%w: no event id", ErrInvalidEvent)
	}
	if e.Provider == "" {
		return nil, fmt.Errorf("%w: no provider", ErrInvalidEvent)
	}
	if e.OccurredAt.IsZero() {
		return nil, fmt.Errorf("%w: no provider time", ErrInvalidEvent)
	}
	if err := CheckTime(e.OccurredAt); err != nil {
		return nil, fmt.Errorf("%w: provider time: %w", ErrInvalidEvent, err)
	}
	switch p := e.Payload.(type) {
	case nil:
		return nil, fmt.Errorf("%w: no payload", ErrInvalidEvent)
	case Requested:
		if err := p.Slot.Validate(); err != nil {
			return nil, err
		}
		if err := CheckCapacity(p.Capacity); err != nil {
			return nil, err
		}
	case Scheduled:
		if err := p.Slot.Validate(); err != nil {
			return nil, err
		}
		if err := CheckCapacity(p.Capacity); err != nil {
			return nil, err
		}
		if p.RescheduledFrom == e.Booking {
			return nil, fmt.Errorf("%w: booking rescheduled from itself", ErrInvalidEvent)
		}
	case Rescheduled:
		if err := p.Slot.Validate(); err != nil {
			return nil, err
		}
	case SeatAdded:
		if err := p.Slot.Validate(); err != nil {
			return nil, err
		}
		if err := CheckCapacity(p.Capacity); err != nil {
			return nil, err
		}
		if p.Seat.IsZero() {
			return nil, fmt.Errorf("%w: seat without reference or attendee key", ErrInvalidEvent)
		}
	case SeatRemoved:
		if p.Seat.IsZero() {
			return nil, fmt.Errorf("%w: seat without reference or attendee key", ErrInvalidEvent)
		}
	case SeriesJoined:
		if p.Series == "" {
			return nil, fmt.Errorf("%w: series link without series", ErrInvalidEvent)
		}
	case Canceled:
		if p.RescheduledTo == e.Booking {
			return nil, fmt.Errorf("%w: booking rescheduled to itself", ErrInvalidEvent)
		}
	case PaymentSucceeded, PaymentFailed, PaymentRefunded, PaymentDisputed:
		if len(paymentRefs(p)) == 0 {
			return nil, fmt.Errorf("%w: payment without reference", ErrInvalidEvent)
		}
	}
	return []Event{e}, nil
}

func paymentRefs(p Payload) []string {
	switch v := p.(type) {
	case PaymentSucceeded:
		return v.Refs
	case PaymentFailed:
		return v.Refs
	case PaymentRefunded:
		return v.Refs
	case PaymentDisputed:
		return v.Refs
	}
	return nil
}
