package steps

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// AttendeeDigest names the attendee state of a seated booking: its seat keys as a set (the order
// the seats were taken in does not matter), hashed. Steps store it (process_steps.attendees), never
// the keys: two states are the same exactly when their digests are.
func AttendeeDigest(seats []string) string {
	sorted := slices.Clone(seats)
	slices.Sort(sorted)
	sum := sha256.Sum256([]byte("seats\x00" + strings.Join(sorted, "\x00")))
	return hex.EncodeToString(sum[:16])
}

// attendeeUpdate is the host-calendar update a seated booking needs when its seats differ from the
// attendee state last written (or possibly written) to its event, by last, the thread's last effected
// calendar step, at the same slot. Its key is over the state it writes and the step it follows: each
// state reached is written once, a state reached again later (a seat left and retaken) is a new
// write, and re-planning the same state after the same step finds the key. ok is false when nothing
// is needed.
func attendeeUpdate(thread string, latest Booking, last Step) (s Step, ok bool) {
	if !latest.Seated || last.Resource == "" {
		return Step{}, false
	}
	digest := AttendeeDigest(latest.Seats)
	if last.Attendees == digest {
		return Step{}, false
	}
	return AttendeeUpdate(thread, latest.ID, digest, last), true
}

// AttendeeUpdate is the update of thread's host-calendar event to the attendee state digest, after
// last (the thread's last effected calendar step), at last's slot: the step the planner plans when a
// seated booking's seats change, and the one an erasure plans (with last's own state, which last no
// longer stands for once an attendee's data is erased) so that the event is written again without
// the erased attendee.
func AttendeeUpdate(thread, booking, digest string, last Step) Step {
	s := Step{Kind: CalendarUpdate, Thread: thread, Booking: booking, State: StatePending, After: last.Key,
		Resource: last.Resource, Start: last.Start, End: last.End, Attendees: digest}
	s.Answers = "active " + slotText(last.Start, last.End) + " attendees " + digest
	s.Key = StepKey(thread, CalendarUpdate, s.Answers+" after "+last.Key.String())
	return s
}

// ListsAttendees reports whether a thread's calendar steps leave an event that lists attendees: the
// last effected one wrote an attendee state, and no delete is live. It returns that step.
func ListsAttendees(thread []Step) (last Step, ok bool) {
	for _, s := range thread {
		if !s.Kind.IsCalendar() {
			continue
		}
		if s.Kind == CalendarDelete && s.State != StateSkipped && s.State != StateFailed {
			return Step{}, false
		}
		if s.State.Effected() {
			last = s
		}
	}
	return last, last.Attendees != "" && last.Key != (Key{})
}
