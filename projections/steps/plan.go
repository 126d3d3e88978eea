package steps

import (
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"bookingledger/domain/eventlog"
)

// Kind is a step's kind. Stored in process_steps.kind: never rename one.
type Kind string

// Step kinds: two targets (families), each with an opening, an updating and a closing kind, and the
// seat cancellation of a seated booking's leaving attendee.
const (
	CalendarCreate    Kind = "host_calendar.create"
	CalendarUpdate    Kind = "host_calendar.update"
	CalendarDelete    Kind = "host_calendar.delete"
	EmailConfirmation Kind = "invitee_email.confirmation"
	EmailRescheduled  Kind = "invitee_email.rescheduled"
	EmailCancellation Kind = "invitee_email.cancellation"
	// EmailSeatCancellation is one leaving attendee's own cancellation email, for a seated booking
	// (Cal.com seats): one step per booking and seat (process_steps.seat), to that seat's contact
	// (seat_contacts) and to nobody else. The booking's own steps follow the booking, not its attendees.
	EmailSeatCancellation Kind = "invitee_email.seat_cancellation"
)

// Kinds lists every kind.
var Kinds = []Kind{CalendarCreate, CalendarUpdate, CalendarDelete, EmailConfirmation, EmailRescheduled, EmailCancellation, EmailSeatCancellation}

// State is a step's state.
type State string

// Step states. pending → requested → done is the normal path; requested is committed before the
// target is called, so a step found requested again has an unknown outcome.
const (
	StatePending             State = "pending"
	StateRequested           State = "requested"
	StateDone                State = "done"
	StateNeedsReconciliation State = "needs_reconciliation"
	StateFailed              State = "failed"
	StateSkipped             State = "skipped"
)

// States lists every state, for validation and metrics.
var States = []State{StatePending, StateRequested, StateDone, StateNeedsReconciliation, StateFailed, StateSkipped}

// Finished lists the states a step ends in unless an operator or a new plan moves it again: nearly
// every step ever planned is in one of them, and the steps gauge counts them as they change instead
// of reading them (process_step_finishes, ADR 0027).
var Finished = []State{StateDone, StateFailed, StateSkipped}

// Effected reports whether a step in state s may have called its target (or did, or an operator said so).
func (s State) Effected() bool {
	return s == StateRequested || s == StateDone || s == StateNeedsReconciliation
}

// family is one target's kinds: what opens, updates and closes the thread's effect there.
type family struct{ open, update, close Kind }

var (
	calendarFamily = family{CalendarCreate, CalendarUpdate, CalendarDelete}
	emailFamily    = family{EmailConfirmation, EmailRescheduled, EmailCancellation}
)

func (f family) has(k Kind) bool { return k == f.open || k == f.update || k == f.close }

// IsCalendar reports whether k acts on the host calendar.
func (k Kind) IsCalendar() bool { return calendarFamily.has(k) }

// Key is a step's key, a UUID (process_steps.key).
type Key [16]byte

// String is the key's canonical UUID text.
func (k Key) String() string {
	h := hex.EncodeToString(k[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// namespace of step keys: 6f1d3c9e-5b8a-4f57-9a53-0b4c8e1f2d7a.
var namespace = Key{0x6f, 0x1d, 0x3c, 0x9e, 0x5b, 0x8a, 0x4f, 0x57, 0x9a, 0x53, 0x0b, 0x4c, 0x8e, 0x1f, 0x2d, 0x7a}

// StepKey is the idempotency key of a step: the thread, the kind and the state it answers, as a
// UUIDv5 (RFC 9562: SHA-1 over the namespace and the name).
func StepKey(thread string, kind Kind, answers string) Key {
	return Key(eventlog.UUIDv5(namespace, []byte(thread+"\x00"+string(kind)+"\x00"+answers)))
}

// SeatStepKey is the key of the seat cancellation of seat (booking.Seat.Key) of booking b: one per
// booking and seat, whenever and however often its leaving is planned.
func SeatStepKey(b, seat string) Key { return StepKey(b, EmailSeatCancellation, "seat "+seat) }

// Booking is what the planner reads of a calendar row.
type Booking struct {
	ID        string
	Status    string // the calendar's status: active, conflict, canceled, …
	Resources []string
	Start     time.Time // zero with End: no slot known
	End       time.Time
	// Seated is true for a seated booking: its host calendar event lists the attendees of Seats (the
	// keys of the seats held now, "" for a seat known only by number: the booking's contact).
	Seated bool
	Seats  []string
	// Left are the keys of the seats that left a seated booking (each seat removal its fold took, over
	// all its events: the calendar's seats_left), and LeftKnown whether the calendar computed them (a
	// row computed before migration 0740 did not): what each leaver's cancellation is planned from.
	Left      []string
	LeftKnown bool
}

// Step is a stored (or planned) step, as far as the planner reads and writes it.
type Step struct {
	Key      Key
	Kind     Kind
	Thread   string
	Booking  string
	State    State
	Answers  string
	After    Key // zero: none
	Resource string
	Seat     string // a seat cancellation's seat (booking.Seat.Key); "" for every other kind
	Start    time.Time
	End      time.Time
	Attempts int

	// Attendees is the attendee state (AttendeeDigest) a calendar step of a seated booking answers
	// (an attendee update, when planned) or wrote (every calendar step, once claimed); "" otherwise.
	Attendees string
}

// Targets says which targets are configured: steps of the others are not planned.
type Targets struct {
	Calendar bool
	Email    bool
}

// Skip marks a pending step superseded.
type Skip struct {
	Key  Key
	Note string
}

// Plan is what the planner decided for one thread, in the order it is written: skips, revivals,
// inserts.
type Plan struct {
	Insert []Step
	Skip   []Skip
	// Revive lists skipped steps that never called out and are wanted again (a booking that lost its
	// slot before its steps ran and took it back).
	Revive []Key
}

func slotText(start, end time.Time) string {
	return start.UTC().Format(time.RFC3339) + "–" + end.UTC().Format(time.RFC3339)
}

// PlanThread decides the steps of one thread — a booking and the bookings rescheduled from it — from
// the calendar row of its latest booking and the steps the thread has (in creation order). It is a
// function of the current state only, so re-planning (a replay, a rebuild, a duplicate delivery)
// finds the keys it planned before and adds nothing.
//
//   - latest active (holding its slot): the opening step (create, confirmation) at the slot if none
//     was effected; an updating step (update, rescheduled) when the last effected slot differs;
//   - latest canceled or rejected: the closing step (delete, cancellation) when something was
//     effected; pending steps become skipped;
//   - anything else (conflict, requested, pending): no new step; pending ones are skipped and come
//     back (revived) when the booking takes its slot;
//   - a thread with a closing step is finished: canceled is terminal.
func PlanThread(thread string, latest Booking, steps []Step, targets Targets) Plan {
	var p Plan
	if targets.Calendar {
		planFamily(&p, calendarFamily, thread, latest, steps, true)
	}
	if targets.Email {
		planFamily(&p, emailFamily, thread, latest, steps, false)
	}
	return p
}

func planFamily(p *Plan, f family, thread string, latest Booking, all []Step, calendar bool) {
	var steps []Step
	for _, s := range all {
		if f.has(s.Kind) {
			steps = append(steps, s)
		}
	}
	live := func(s Step) bool { return s.State != StateSkipped && s.State != StateFailed }
	if slices.ContainsFunc(steps, func(s Step) bool { return s.Kind == f.close && live(s) }) {
		return // finished: nothing after a delete or a cancellation
	}
	var lastEffected *Step
	for i := range steps {
		if steps[i].State.Effected() {
			lastEffected = &steps[i]
		}
	}
	skipPendingExcept := func(keep Key, note string) {
		for _, s := range steps {
			if s.State == StatePending && s.Key != keep {
				p.Skip = append(p.Skip, Skip{Key: s.Key, Note: note})
			}
		}
	}
	want := func(s Step) {
		for _, have := range steps {
			if have.Key == s.Key {
				if have.State == StateSkipped && have.Attempts == 0 {
					p.Revive = append(p.Revive, have.Key)
				}
				return
			}
		}
		p.Insert = append(p.Insert, s)
	}
	resource := ""
	if len(latest.Resources) > 0 {
		resource = latest.Resources[0]
	}

	switch {
	case latest.Status == "active" && !latest.Start.IsZero():
		slot := slotText(latest.Start, latest.End)
		var s Step
		switch {
		case lastEffected == nil:
			s = Step{Kind: f.open}
		case lastEffected.Start.Equal(latest.Start) && lastEffected.End.Equal(latest.End):
			if u, ok := attendeeUpdate(thread, latest, *lastEffected); ok && calendar {
				skipPendingExcept(u.Key, "superseded by "+string(u.Kind)+" for "+u.Answers)
				want(u) // the seats changed: the event's attendee list is written again (attendees.go)
				return
			}
			skipPendingExcept(Key{}, "superseded: the booking is back at "+slot+", which was already acted on")
			return
		default:
			s = Step{Kind: f.update, After: lastEffected.Key}
			resource = lastEffected.Resource
		}
		if calendar && resource == "" {
			return // no host calendar to act on
		}
		s.Thread, s.Booking, s.State = thread, latest.ID, StatePending
		s.Answers = "active " + slot
		s.Key = StepKey(thread, s.Kind, s.Answers)
		s.Resource, s.Start, s.End = resource, latest.Start, latest.End
		skipPendingExcept(s.Key, "superseded by "+string(s.Kind)+" for "+s.Answers)
		want(s)
	case latest.Status == "canceled" || latest.Status == "rejected":
		note := fmt.Sprintf("booking %s is %s before this step ran: nothing to send", latest.ID, latest.Status)
		skipPendingExcept(Key{}, note)
		if lastEffected == nil {
			return
		}
		s := Step{Kind: f.close, Thread: thread, Booking: latest.ID, State: StatePending, After: lastEffected.Key,
			Answers: latest.Status, Resource: lastEffected.Resource, Start: lastEffected.Start, End: lastEffected.End}
		s.Key = StepKey(thread, s.Kind, "")
		want(s)
	default:
		skipPendingExcept(Key{}, fmt.Sprintf("booking %s is %s (does not hold its slot) before this step ran", latest.ID, latest.Status))
	}
}
