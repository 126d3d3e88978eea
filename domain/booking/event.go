package booking

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"bookingledger/domain/eventlog"
)

// ID identifies a booking: "<provider>-<provider key>", e.g. "calendly-7c1f…" for a Calendly invitee.
type ID string

// StreamPrefix starts every booking stream's name.
const StreamPrefix = "booking-"

// Stream is the name of the booking's event stream.
func (id ID) Stream() string { return StreamPrefix + string(id) }

// FromStream returns the booking ID of a stream name and whether the stream is a booking stream.
func FromStream(stream string) (ID, bool) {
	if !strings.HasPrefix(stream, StreamPrefix) || len(stream) == len(StreamPrefix) {
		return "", false
	}
	return ID(stream[len(StreamPrefix):]), true
}

// Validate checks that the ID can name a stream.
func (id ID) Validate() error {
	if id == "" {
		return fmt.Errorf("%w: empty booking id", ErrInvalidEvent)
	}
	if len(id) > 200 {
		return fmt.Errorf("%w: booking id longer than 200 bytes", ErrInvalidEvent)
	}
	if strings.ContainsAny(string(id), " \t\r\n") {
		return fmt.Errorf("%w: booking id %q contains white space", ErrInvalidEvent, string(id))
	}
	// Nor what a PostgreSQL text column refuses (NUL, bytes that are not UTF-8): an ID from a URL
	// would otherwise fail its query with a 500 rather than a 400.
	if !utf8.ValidString(string(id)) || strings.IndexFunc(string(id), unicode.IsControl) >= 0 {
		return fmt.Errorf("%w: booking id %q contains a control character or is not UTF-8", ErrInvalidEvent, string(id))
	}
	return nil
}

// EventType is the stable, versioned wire name of an event. Names are never reused: a changed payload
// gets a new version (".v2") and the old one keeps being read.
type EventType string

const (
	TypeRequested        EventType = "booking.requested.v1"
	TypeScheduled        EventType = "booking.scheduled.v1"
	TypeRescheduled      EventType = "booking.rescheduled.v1"
	TypeMeetingStarted   EventType = "booking.meeting_started.v1"
	TypeMeetingEnded     EventType = "booking.meeting_ended.v1"
	TypeNoShowMarked     EventType = "booking.no_show_marked.v1"
	TypeNoShowCleared    EventType = "booking.no_show_cleared.v1"
	TypePaymentFailed    EventType = "booking.payment_failed.v1"
	TypePaymentSucceeded EventType = "booking.payment_succeeded.v1"
	TypePaymentRefunded  EventType = "booking.payment_refunded.v1"
	TypePaymentDisputed  EventType = "booking.payment_disputed.v1"
	TypeRejected         EventType = "booking.rejected.v1"
	TypeCanceled         EventType = "booking.canceled.v1"
	// Seats of a seated booking (several attendees in one booking, Cal.com seats) and the link of an
	// occurrence to its recurring series.
	TypeSeatAdded      EventType = "booking.seat_added.v1"
	TypeSeatRemoved    EventType = "booking.seat_removed.v1"
	TypeSeriesJoined   EventType = "booking.series_joined.v1"
	TypeSeriesCanceled EventType = "booking.series_canceled.v1"
)

// precedence breaks ties between events with the same provider time: a booking is requested before it
// is scheduled, scheduled before it is moved, marked, paid or canceled; a payment fails before it
// succeeds and succeeds before it is refunded. A seat is added before one leaves, so a seat taken and
// left in the same millisecond ends with the seat free. Canceled is last: a cancel stamped with the
// same second as a create ends the booking. The ranks are only compared, never stored.
var precedence = map[EventType]int{
	TypeRequested:        0,
	TypeScheduled:        1,
	TypeSeatAdded:        2,
	TypeSeriesJoined:     3,
	TypeRescheduled:      4,
	TypeMeetingStarted:   5,
	TypeMeetingEnded:     6,
	TypeNoShowMarked:     7,
	TypeNoShowCleared:    8,
	TypePaymentFailed:    9,
	TypePaymentSucceeded: 10,
	TypePaymentRefunded:  11,
	TypePaymentDisputed:  12,
	TypeSeatRemoved:      13,
	TypeRejected:         14,
	TypeSeriesCanceled:   15,
	TypeCanceled:         16,
}

// Precedence returns the tie-break rank of a type; unknown types sort last.
func Precedence(t EventType) int {
	if p, ok := precedence[t]; ok {
		return p
	}
	return len(precedence)
}

// Event is one fact about a booking as a provider reported it.
type Event struct {
	// ID is derived deterministically from the provider's identity of the event (see ProviderRef), so
	// a redelivery carries the same ID.
	ID      eventlog.EventID
	Booking ID
	// Provider is the source ("calendly", "calcom", "acuity", "stripe", "standard").
	Provider string
	// ProviderRef is the provider's identity of this event, the input of ID (e.g. the invitee URI and
	// the event name). Auditors see it; it holds no personal data.
	ProviderRef string
	// OccurredAt is the provider's time of the change: the fold orders by it, never by arrival.
	OccurredAt time.Time
	Payload    Payload
	// Fact, when set, names the provider's fact the event records apart from the delivery that
	// brought it, for a provider whose identity holds a per-send stamp (Cal.com's envelope createdAt):
	// the same fact read later from its API cannot derive that stamp, so not the ID either. A stored
	// event of the same booking and type whose ProviderRef is Fact, or begins with Fact and a space,
	// records the same fact: the ledger appends the event no second time (SameFact). Not stored:
	// ProviderRef carries it.
	Fact string
}

// SameFact reports whether stored, an event already recorded, records the fact e names (e.Fact),
// whatever their IDs.
func (e Event) SameFact(stored Event) bool {
	if e.Fact == "" || stored.Provider != e.Provider || stored.Booking != e.Booking || stored.Type() != e.Type() {
		return false
	}
	ref := stored.ProviderRef
	return ref == e.Fact || (len(ref) > len(e.Fact) && ref[:len(e.Fact)] == e.Fact && ref[len(e.Fact)] == ' ')
}

// Type returns the wire name of the event's payload.
func (e Event) Type() EventType {
	if e.Payload == nil {
		return ""
	}
	return e.Payload.EventType()
}

// Payload is one of the event structs below.
type Payload interface {
	EventType() EventType
}

// Slot is when and where a booking takes place.
type Slot struct {
	// Meeting is the provider's meeting (Calendly scheduled event, Cal.com booking series, …). Several
	// bookings of one meeting (group events) share its slot without conflict.
	Meeting string
	// Resources are the calendars the booking occupies (host users); never empty.
	Resources []string
	Start     time.Time
	End       time.Time
}

// Validate checks a slot's shape.
func (s Slot) Validate() error {
	if s.Meeting == "" {
		return fmt.Errorf("%w: slot without meeting", ErrInvalidSlot)
	}
	if len(s.Resources) == 0 {
		return fmt.Errorf("%w: slot without resource", ErrInvalidSlot)
	}
	for _, r := range s.Resources {
		if r == "" {
			return fmt.Errorf("%w: empty resource", ErrInvalidSlot)
		}
	}
	if s.Start.IsZero() || s.End.IsZero() {
		return fmt.Errorf("%w: slot without start or end", ErrInvalidSlot)
	}
	if !s.End.After(s.Start) {
		return fmt.Errorf("%w: end %s not after start %s", ErrInvalidSlot, s.End.Format(time.RFC3339), s.Start.Format(time.RFC3339))
	}
	for _, t := range []time.Time{s.Start, s.End} {
		if err := CheckTime(t); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidSlot, err)
		}
	}
	return nil
}

// ErrInvalidTime: a time no event can carry (CheckTime).
var ErrInvalidTime = errors.New("time no event can carry")

// CheckTime refuses a time whose UTC year is outside 0000–9999: events are stored with RFC 3339
// times, which have four-digit years, so such an event could never be encoded, and a delivery
// carrying one would fail on every retry instead of being quarantined. The year is the UTC one:
// "9999-12-31T23:59:59-23:59" is in the year 10000. It refuses the zero time too, which Decide
// reads as no time at all ("0001-01-01T00:00:00Z" is a valid RFC 3339 spelling of it).
func CheckTime(t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("%w: the zero time 0001-01-01T00:00:00Z stands for none", ErrInvalidTime)
	}
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("%w: %s is outside the years 0000 to 9999 (UTC)", ErrInvalidTime, t.UTC().Format(time.RFC3339))
	}
	return nil
}

// MaxCapacity bounds a meeting's invitee limit (Requested and Scheduled Capacity): far above any
// real meeting, and within the 32-bit integer the calendar read model keeps it in — a larger value
// would stop the projection at that event, on every retry.
const MaxCapacity = 1_000_000

// CheckCapacity refuses a capacity outside 0..MaxCapacity (0: not given).
func CheckCapacity(n int) error {
	if n < 0 || n > MaxCapacity {
		return fmt.Errorf("%w: capacity %d outside 0 to %d", ErrInvalidEvent, n, MaxCapacity)
	}
	return nil
}

// Requested: the booking awaits the host's confirmation (Cal.com BOOKING_REQUESTED).
type Requested struct {
	Slot Slot
	// Capacity is the meeting's invitee limit; above 1 the meeting is a group event.
	Capacity int
}

// Scheduled: the booking is confirmed for a slot.
type Scheduled struct {
	Slot     Slot
	Capacity int
	// RescheduledFrom links a booking created by a reschedule to the booking it replaces.
	RescheduledFrom ID
	// PaymentRefs are the provider payment ids the booking carries ("stripe:ch_…", "stripe:pi_…"), to
	// link payment events.
	PaymentRefs []string
}

// Rescheduled: the same booking moved to another slot (Acuity keeps one appointment id).
type Rescheduled struct {
	Slot Slot
}

// Canceled ends the booking. Canceled is terminal.
type Canceled struct {
	Reason string
	// CanceledBy is "host", "invitee" or "provider" (implied by the provider's own reschedule).
	CanceledBy string
	// RescheduledTo links to the booking that replaces this one, when the cancel is a reschedule.
	RescheduledTo ID
	// Implied is true when the provider sent no cancel and the ledger inferred it (Cal.com reschedules).
	Implied bool
}

// Seat is one attendee's place in a seated booking, named without personal data: the provider's seat
// reference where the payload has one (Cal.com attendeeSeatId / seatUid), and a key of the attendee
// (a digest of the normalized e-mail address, never the address). Either may be empty, not both.
type Seat struct {
	UID      string
	Attendee string
}

// Same reports whether two seats are one: by seat reference when both have one, else by attendee key.
func (s Seat) Same(o Seat) bool {
	if s.UID != "" && o.UID != "" {
		return s.UID == o.UID
	}
	return s.Attendee != "" && s.Attendee == o.Attendee
}

// Key names the seat in one string: its reference, else its attendee key ("" for a zero seat). The
// seat's contact and its own steps are keyed by it.
func (s Seat) Key() string { return cmp.Or(s.UID, s.Attendee) }

// IsZero reports whether the seat names nobody (a seat known only by count).
func (s Seat) IsZero() bool { return s.UID == "" && s.Attendee == "" }

// SeatAdded: an attendee took a seat of a seated booking (the booking's first seat creates it).
type SeatAdded struct {
	Slot Slot
	// Capacity is the number of seats of the slot.
	Capacity    int
	Seat        Seat
	PaymentRefs []string
}

// SeatRemoved: one attendee left a seated booking; the others keep it. The booking is canceled when
// its last attendee leaves.
type SeatRemoved struct {
	Seat Seat
	// Reason is the leaver's cancellation reason: free text, kept apart (SplitFreeText).
	Reason string
}

// SeriesJoined links the booking, one occurrence of a recurring series, to its series (Cal.com
// recurringEventId).
type SeriesJoined struct {
	Series string
}

// SeriesCanceled: the cancel of this booking canceled the remaining occurrences of its series too
// (Cal.com "cancel all remaining"). Series is empty when the delivery did not name it; the calendar
// then takes the series this booking joined. Every occurrence of the series that starts at or after
// the event's provider time is canceled with it.
// The reason is on the Canceled event recorded with it (kept apart as free text).
type SeriesCanceled struct {
	Series     string
	CanceledBy string
}

// Rejected: the host declined a requested booking. Terminal.
type Rejected struct {
	Reason string
}

// NoShowMarked and NoShowCleared record the provider's no-show flag.
type NoShowMarked struct{}
type NoShowCleared struct{}

// MeetingStarted and MeetingEnded are informational (Cal.com MEETING_*).
type MeetingStarted struct{}
type MeetingEnded struct{}

// Payment events carry every provider payment id of the payment ("stripe:pi_…", "stripe:ch_…"), so the
// calendar can link them to the booking whose PaymentRefs share one.
type PaymentSucceeded struct {
	Refs     []string
	Amount   int64 // minor units
	Currency string
}
type PaymentFailed struct {
	Refs   []string
	Reason string
}
type PaymentRefunded struct {
	Refs     []string
	Amount   int64 // minor units refunded so far
	Currency string
}
type PaymentDisputed struct {
	Refs   []string
	Reason string
}

func (Requested) EventType() EventType        { return TypeRequested }
func (Scheduled) EventType() EventType        { return TypeScheduled }
func (Rescheduled) EventType() EventType      { return TypeRescheduled }
func (Canceled) EventType() EventType         { return TypeCanceled }
func (Rejected) EventType() EventType         { return TypeRejected }
func (NoShowMarked) EventType() EventType     { return TypeNoShowMarked }
func (NoShowCleared) EventType() EventType    { return TypeNoShowCleared }
func (MeetingStarted) EventType() EventType   { return TypeMeetingStarted }
func (MeetingEnded) EventType() EventType     { return TypeMeetingEnded }
func (PaymentSucceeded) EventType() EventType { return TypePaymentSucceeded }
func (PaymentFailed) EventType() EventType    { return TypePaymentFailed }
func (PaymentRefunded) EventType() EventType  { return TypePaymentRefunded }
func (PaymentDisputed) EventType() EventType  { return TypePaymentDisputed }
func (SeatAdded) EventType() EventType        { return TypeSeatAdded }
func (SeatRemoved) EventType() EventType      { return TypeSeatRemoved }
func (SeriesJoined) EventType() EventType     { return TypeSeriesJoined }
func (SeriesCanceled) EventType() EventType   { return TypeSeriesCanceled }

// Compare is the fold order: provider time, then type precedence, then event ID. It is total over
// distinct event IDs, so sorting any permutation of a set gives one sequence.
func Compare(a, b Event) int {
	if c := a.OccurredAt.Compare(b.OccurredAt); c != 0 {
		return c
	}
	pa, pb := Precedence(a.Type()), Precedence(b.Type())
	if pa != pb {
		if pa < pb {
			return -1
		}
		return 1
	}
	return a.ID.Compare(b.ID)
}
