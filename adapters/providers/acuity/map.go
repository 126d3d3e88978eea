package acuity

import (
	"fmt"
	"time"

	"bookingledger/adapters/providers"
	"bookingledger/domain/booking"
)

// BookingID is the bookingledger booking of an appointment: "acuity-<id>". The id survives
// reschedules, so one appointment is one booking stream from its first state to its cancel.
func BookingID(appointmentID string) booking.ID { return booking.ID(Name + "-" + appointmentID) }

// Resource is the calendar an appointment occupies: "acuity-calendar-<calendarID>".
func Resource(calendarID string) string { return Name + "-calendar-" + calendarID }

// Meeting is the meeting of an appointment: "acuity-<id>", or "acuity-class-<classID>" for a seat in a
// class, so that the seats of one class share their slot without being a double booking.
func Meeting(a Appointment) string {
	if a.ClassID != "" {
		return Name + "-class-" + a.ClassID
	}
	return Name + "-" + a.ID
}

// MapAppointment turns a notification and the appointment fetched for it at observedAt into booking
// events. It is pure: the same inputs give the same events.
//
// The fetched state is the truth, and the only input: the action decides whether to fetch, never what
// to map. Acuity fires changed next to scheduled, rescheduled and canceled, and a delivery may be
// fetched long after a later change, so two deliveries that observe the same state must map to the
// same events whatever their actions — that is what makes every duplicate collapse. Each delivery
// maps to these events, with these identities (ProviderRef, the input of the event ID):
//
//   - the observation of the slot: booking.Rescheduled to the fetched slot,
//     "appointment <id> slot <start> <end> calendar <calendarID>", at observedAt. Each distinct slot
//     is one event, so retries, replays and changed-next-to-rescheduled collapse while each real move
//     is new. The first slot is observed too, so every stream starts with a Scheduled and a
//     Rescheduled to the same slot: the second changes nothing, and it is the price of not knowing,
//     from one fetch, whether a slot is the first or a move.
//   - when the appointment is canceled, booking.Canceled, "appointment <id> canceled", at
//     observedAt. It folds after the slot observed with it (type precedence), so a canceled booking
//     ends on its last slot even when the move before the cancel was only ever fetched canceled.
//   - the anchor: booking.Scheduled, "appointment <id> scheduled", at datetimeCreated. Its identity
//     has no state, so the first one stored is the booking's creation and later copies are
//     duplicates; its slot is whatever the first stored delivery saw, and the observations, all
//     later in the fold, set the slot that counts.
//   - booking.NoShowMarked, "appointment <id> no-show", at observedAt, when noShow is set and the
//     appointment is not canceled. Acuity's flag can be cleared again; that is not mapped.
//
// Time: Acuity sends none. Observations carry observedAt — when their state was fetched — and the
// anchor carries datetimeCreated (observedAt when Acuity sent none); observedAt is raised to
// datetimeCreated if clock skew put it earlier, so the anchor always folds first. A fetch returns the
// state current at that instant, so a state is first observed while it is current, and the order of
// first observations is the order of the changes: the fold ends on the latest state whatever order
// the deliveries arrived in. The exception: a return to an exact earlier slot (A → B → A) derives the
// identity A already has and is a duplicate; the booking keeps B until its next change.
//
// Errors: an appointment whose id is not the notification's wraps ErrBadAppointment.
func MapAppointment(n Notification, a Appointment, observedAt time.Time) (providers.Mapped, error) {
	m := providers.Mapped{DeliveryID: n.DeliveryID()}
	if !n.Fetches() {
		m.Reason = ignoredReason(n)
		return m, nil
	}
	if a.ID != n.ID {
		return m, fmt.Errorf("%w: asked for appointment %s, got %s", ErrBadAppointment, n.ID, providers.Clip(a.ID))
	}
	id := BookingID(a.ID)
	created := a.Created
	if created.IsZero() {
		created = observedAt.UTC()
	}
	at := observedAt.UTC()
	if at.Before(created) {
		at = created
	}
	slot := booking.Slot{
		Meeting:   Meeting(a),
		Resources: []string{Resource(a.CalendarID)},
		Start:     a.Start,
		End:       a.End,
	}
	ref := "appointment " + a.ID
	ev := func(identity string, t time.Time, p booking.Payload) booking.Event {
		return booking.Event{
			ID: providers.EventID(Name, identity), Booking: id, Provider: Name,
			ProviderRef: identity, OccurredAt: t, Payload: p,
		}
	}
	anchor := ev(ref+" scheduled", created, booking.Scheduled{Slot: slot, Capacity: 1})
	slotRef := fmt.Sprintf("%s slot %s %s calendar %s", ref, a.Start.Format(time.RFC3339), a.End.Format(time.RFC3339), a.CalendarID)
	observed := ev(slotRef, at, booking.Rescheduled{Slot: slot})
	// The event the delivery is about comes first: the ingress answers with its booking and ID.
	switch {
	case a.Canceled:
		m.Events = []booking.Event{ev(ref+" canceled", at, booking.Canceled{}), observed, anchor}
	case a.NoShow:
		m.Events = []booking.Event{observed, anchor, ev(ref+" no-show", at, booking.NoShowMarked{})}
	default:
		m.Events = []booking.Event{observed, anchor}
	}
	m.Contacts = providers.InZone(providers.NewContacts(id, a.Email, a.Name), a.Timezone)
	return m, nil
}

func ignoredReason(n Notification) string {
	return "acuity action " + n.RawAction + " not mapped"
}
