package sample

import (
	"fmt"
	"time"

	"bookingledger/adapters/providers/calcom"
	"bookingledger/adapters/providers/calendly"
)

// EventCalendlyRescheduled is the name send takes for Calendly's reschedule, which Calendly delivers
// as two webhooks (CalendlyReschedule); it is not a Calendly event.
const EventCalendlyRescheduled = "invitee.rescheduled"

// CalendlyRescheduledInvitee is the invitee key of the new invitee a Calendly reschedule of booking
// creates: Calendly makes a new invitee of a new scheduled event.
func CalendlyRescheduledInvitee(booking string) string { return booking + "-rescheduled" }

func calendlyInviteeURI(booking string) string {
	return "https://api.calendly.com/scheduled_events/" + token("calendly-event", booking) + "/invitees/" + booking
}

// Event is one delivery's event and body.
type Event struct {
	Event string
	Body  []byte
}

// CalendlyReschedule builds the pair Calendly sends when an invitee reschedules booking p.Booking
// (at p.Start–p.End) to start at to (same duration): invitee.canceled of the old invitee with
// rescheduled: true and new_invitee set, and invitee.created of the new invitee
// (CalendlyRescheduledInvitee) with old_invitee set, both changed at the same moment (five days
// before the old start). Calendly does not document which arrives first: the cancel comes first
// unless createdFirst.
func CalendlyReschedule(p Params, to time.Time, createdFirst bool) ([]Event, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.withDefaults()
	if to.IsZero() {
		return nil, fmt.Errorf("reschedule: no new start")
	}
	at := p.Start.Add(-5 * 24 * time.Hour).Add(905123 * time.Microsecond)
	old := p
	old.newInvitee, old.rescheduledAt = calendlyInviteeURI(CalendlyRescheduledInvitee(p.Booking)), at
	moved := p
	moved.Booking = CalendlyRescheduledInvitee(p.Booking)
	moved.Start, moved.End = to.UTC(), to.UTC().Add(p.End.Sub(p.Start))
	moved.oldInvitee, moved.rescheduledAt = calendlyInviteeURI(p.Booking), at
	canceled, err := encode(calendlyBody(calendly.EventInviteeCanceled, old))
	if err != nil {
		return nil, err
	}
	created, err := encode(calendlyBody(calendly.EventInviteeCreated, moved))
	if err != nil {
		return nil, err
	}
	out := []Event{{calendly.EventInviteeCanceled, canceled}, {calendly.EventInviteeCreated, created}}
	if createdFirst {
		out[0], out[1] = out[1], out[0]
	}
	return out, nil
}

// CalcomReschedule builds Cal.com's BOOKING_RESCHEDULED of booking p.Booking to start at to (same
// duration): one delivery, the new booking under CalcomRescheduledUID naming the old in rescheduleUid.
func CalcomReschedule(p Params, to time.Time) ([]Event, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p = p.withDefaults()
	p.Start, p.End = to.UTC(), to.UTC().Add(p.End.Sub(p.Start))
	b, err := Body("calcom", calcom.TriggerBookingRescheduled, p)
	if err != nil {
		return nil, err
	}
	return []Event{{calcom.TriggerBookingRescheduled, b}}, nil
}
