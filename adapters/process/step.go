package process

import (
	"time"

	"github.com/google/uuid"

	"bookingledger/projections/steps"
)

// Kinds, states and targets are the planner's (projections/steps).
type (
	Kind    = steps.Kind
	State   = steps.State
	Targets = steps.Targets
)

// Step kinds and states (projections/steps).
const (
	CalendarCreate           = steps.CalendarCreate
	CalendarUpdate           = steps.CalendarUpdate
	CalendarDelete           = steps.CalendarDelete
	EmailConfirmation        = steps.EmailConfirmation
	EmailRescheduled         = steps.EmailRescheduled
	EmailCancellation        = steps.EmailCancellation
	EmailSeatCancellation    = steps.EmailSeatCancellation
	StatePending             = steps.StatePending
	StateRequested           = steps.StateRequested
	StateDone                = steps.StateDone
	StateNeedsReconciliation = steps.StateNeedsReconciliation
	StateFailed              = steps.StateFailed
	StateSkipped             = steps.StateSkipped
)

// States and Kinds list every state and kind.
var (
	States = steps.States
	Kinds  = steps.Kinds
)

// StepKey is steps.StepKey as a UUID.
func StepKey(thread string, kind Kind, answers string) uuid.UUID {
	return uuid.UUID(steps.StepKey(thread, kind, answers))
}

// SeatStepKey is steps.SeatStepKey as a UUID.
func SeatStepKey(b, seat string) uuid.UUID { return uuid.UUID(steps.SeatStepKey(b, seat)) }

// Step is a stored step: a process_steps row.
type Step struct {
	ID       int64
	Key      uuid.UUID
	Kind     Kind
	Thread   string
	Booking  string
	State    State
	Answers  string
	After    uuid.UUID // uuid.Nil: none
	Resource string
	Seat     string // a seat cancellation's seat (booking.Seat.Key)
	Start    time.Time
	End      time.Time
	Attempts int
	// Fields below are read for history and workers, not by the planner.
	LeaseUntil  time.Time
	Href        string
	ETag        string
	LastError   string
	Note        string
	CreatedAt   time.Time
	RequestedAt time.Time
	FinishedAt  time.Time
	UpdatedAt   time.Time

	// Attendees is the attendee state (steps.AttendeeDigest) an attendee update answers, or a calendar
	// step of a seated booking wrote once claimed; "" otherwise.
	Attendees string
	// Seated and Seats are the booking's seats as its claim read them from the calendar (not stored): a
	// calendar step of a seated booking writes their attendees (attendees.go).
	Seated bool
	Seats  []string
}
