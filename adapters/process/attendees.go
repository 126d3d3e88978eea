package process

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"bookingledger/projections/steps"
)

// Attendee is one attendee a seated booking's host calendar event lists.
type Attendee struct {
	Name  string
	Email string
}

// AttendeesText is the attendee section of a seated booking's event description, for the targets
// that carry the list in the text (Google Calendar, Microsoft 365: their attendee fields make the
// server invite the attendees, see docs/process-steps.md); "" for an event that lists none.
func (ev Event) AttendeesText() string {
	if !ev.Seated {
		return ""
	}
	var b strings.Builder
	b.WriteString("Attendees:")
	if len(ev.Attendees) == 0 {
		b.WriteString(" none known")
	}
	for _, a := range ev.Attendees {
		b.WriteString("\n- ")
		if a.Name != "" {
			b.WriteString(a.Name + " <" + a.Email + ">")
		} else {
			b.WriteString(a.Email)
		}
	}
	return b.String()
}

// DescriptionWithAttendees is the event's description followed by its attendee section, if any.
func (ev Event) DescriptionWithAttendees() string {
	list := ev.AttendeesText()
	switch {
	case list == "":
		return ev.Description
	case ev.Description == "":
		return list
	}
	return strings.TrimRight(ev.Description, "\n") + "\n\n" + list
}

// claimAttendees decides, inside a calendar step's claim (st locked; row is the booking's calendar
// row the claim read, nil when it read none), which attendee state the step writes: a seated
// booking's event lists the seats the calendar holds now. It sets st.Seated and st.Seats for the call
// and returns the state's digest to record (nil: leave the record as it is). An attendee update
// planned for seats that have changed since is superseded (note): the planner plans the update of
// the current ones, so each state is written once. A recovered claim keeps the state its first
// claim recorded (its write may have landed), and writes the current seats if it writes at all.
func (w *Worker) claimAttendees(ctx context.Context, tx pgx.Tx, st *Step, row *steps.Booking, recovered bool) (*string, string, error) {
	if !st.Kind.IsCalendar() || st.Kind == CalendarDelete {
		return nil, "", nil
	}
	if row == nil {
		cal, ok, err := w.cfg.Slots.Slot(ctx, tx, st.Booking)
		if err != nil {
			return nil, "", fmt.Errorf("process: read calendar row: %w", err)
		}
		if !ok {
			return nil, "", nil
		}
		row = &cal
	}
	if !row.Seated {
		return nil, "", nil
	}
	st.Seated, st.Seats = true, row.Seats
	if recovered {
		return nil, "", nil
	}
	digest := steps.AttendeeDigest(row.Seats)
	if st.Kind == CalendarUpdate && st.Attendees != "" && st.Attendees != digest {
		return nil, fmt.Sprintf("superseded: the attendees of booking %s changed since this update was planned (the update for the current ones follows)", st.Booking), nil
	}
	return &digest, "", nil
}

// withAttendees puts a seated booking's attendees into ev: each seat's contact (the booking's
// contact for a seat known only by number), once per address. An attendee without a contact (never
// sent, or erased) is not listed. ok is false with the outcome when the contacts cannot be read.
func (w *Worker) withAttendees(ctx context.Context, s *Step, ev *Event) (outcome, bool) {
	if !s.Seated {
		return outcome{}, true
	}
	ev.Seated, ev.Attendees = true, nil
	contacts, err := w.cfg.Contacts.Attendees(ctx, s.Booking, s.Seats)
	if err != nil {
		return outcome{state: StatePending, err: fmt.Errorf("read attendees: %w: %w", ErrNothingDone, err)}, false
	}
	seen := map[string]bool{}
	for _, seat := range s.Seats {
		c, ok := contacts[seat]
		if !ok || c.Email == "" || seen[strings.ToLower(c.Email)] {
			continue
		}
		seen[strings.ToLower(c.Email)] = true
		ev.Attendees = append(ev.Attendees, Attendee{Name: c.Name, Email: c.Email})
	}
	return outcome{}, true
}
