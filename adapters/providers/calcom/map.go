package calcom

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"bookingledger/adapters/providers"
	"bookingledger/domain/booking"
)

// Cal.com triggers this package maps.
const (
	TriggerBookingCreated     = "BOOKING_CREATED"
	TriggerBookingRequested   = "BOOKING_REQUESTED"
	TriggerBookingRejected    = "BOOKING_REJECTED"
	TriggerBookingCancelled   = "BOOKING_CANCELLED"
	TriggerBookingRescheduled = "BOOKING_RESCHEDULED"
	TriggerNoShowUpdated      = "BOOKING_NO_SHOW_UPDATED"
	TriggerMeetingStarted     = "MEETING_STARTED"
	TriggerMeetingEnded       = "MEETING_ENDED"
)

// envelope is the outer object. MEETING_* triggers are flat: the booking's fields sit next to
// triggerEvent, and createdAt is then the booking's creation time.
type envelope struct {
	TriggerEvent string          `json:"triggerEvent"`
	CreatedAt    string          `json:"createdAt"`
	Payload      json.RawMessage `json:"payload"`
	// Flat MEETING_* fields.
	UID       string `json:"uid"`
	StartTime string `json:"startTime"`
	EndTime   string `json:"endTime"`
}

type person struct {
	ID    json.Number `json:"id"`
	Email string      `json:"email"`
	Name  string      `json:"name"` // for Mapped.Contacts only
	// TimeZone is the attendee's IANA zone, for Mapped.Contacts only.
	TimeZone string `json:"timeZone"`
	// SeatUID is an attendee's seat reference where the payload carries it per attendee.
	SeatUID     string `json:"seatUid"`
	BookingSeat *struct {
		ReferenceUID string `json:"referenceUid"`
	} `json:"bookingSeat"`
}

// bookingPayload holds the fields the ledger needs; names, notes and answers are not decoded.
type bookingPayload struct {
	UID                string          `json:"uid"`
	StartTime          string          `json:"startTime"`
	EndTime            string          `json:"endTime"`
	Organizer          *person         `json:"organizer"`
	Attendees          []person        `json:"attendees"`
	ICalUID            string          `json:"iCalUID"`
	RescheduleUID      string          `json:"rescheduleUid"`
	CancellationReason string          `json:"cancellationReason"`
	RejectionReason    string          `json:"rejectionReason"`
	CancelledBy        string          `json:"cancelledBy"`
	SeatsPerTimeSlot   *int            `json:"seatsPerTimeSlot"`
	Metadata           json.RawMessage `json:"metadata"`
	// AttendeeSeatID is the seat reference of the attendee the delivery is about (a new seat).
	AttendeeSeatID string `json:"attendeeSeatId"`
	// RequestReschedule is false on the cancel of a whole booking, absent (or true) on a seat's.
	RequestReschedule json.RawMessage `json:"requestReschedule"`
	// The series of a recurring booking's occurrence, where the payload names it.
	RecurringEventID    string `json:"recurringEventId"`
	RecurringBookingUID string `json:"recurringBookingUid"`
	// RecurringEvent is the series' rule; a cancel carries it only when it canceled all remaining
	// occurrences.
	RecurringEvent json.RawMessage `json:"recurringEvent"`
}

// seated reports whether the booking's event type has seats.
func (b bookingPayload) seated() bool { return b.SeatsPerTimeSlot != nil && *b.SeatsPerTimeSlot > 0 }

// series is the recurring series the payload names, or "".
func (b bookingPayload) series() string {
	return strings.TrimSpace(cmp.Or(b.RecurringEventID, b.RecurringBookingUID))
}

// seatCancel reports whether a cancel is one attendee leaving a seated booking: Cal.com then sends the
// whole booking's uid with only the leaver in attendees and no cancelledBy, while the cancel of the
// whole booking carries cancelledBy and requestReschedule: false. Some Cal.com versions set
// requestReschedule: true on a seat's cancel, so only false marks the whole booking's.
func (b bookingPayload) seatCancel() bool {
	return b.seated() && strings.TrimSpace(b.CancelledBy) == "" && strings.TrimSpace(string(b.RequestReschedule)) != "false" &&
		len(b.Attendees) > 0
}

// seat names an attendee's seat without personal data: the seat reference where the payload has
// one (ref, else the attendee's own), and a digest of the normalized e-mail address.
func seat(a person, ref string) booking.Seat {
	s := booking.Seat{UID: strings.TrimSpace(cmp.Or(ref, a.SeatUID))}
	if s.UID == "" && a.BookingSeat != nil {
		s.UID = strings.TrimSpace(a.BookingSeat.ReferenceUID)
	}
	if strings.TrimSpace(a.Email) != "" {
		s.Attendee = "email-sha256:" + emailDigest(a.Email)
	}
	return s
}

type noShowPayload struct {
	BookingUID string `json:"bookingUid"`
	Attendees  []struct {
		NoShow bool `json:"noShow"`
	} `json:"attendees"`
}

type meetingPayload struct {
	UID       string `json:"uid"`
	StartTime string `json:"startTime"`
	EndTime   string `json:"endTime"`
}

// mapBody maps one Cal.com delivery.
//
// Identity (event ID input, also ProviderRef): "<trigger> <uid> <createdAt>". Cal.com retries keep
// createdAt, and no timestamp is signed, so a body replayed later derives the same IDs and is a
// duplicate, never a new event. The implied cancel of a reschedule appends " implied-cancel
// <rescheduleUid>".
//
// Time: envelope createdAt (ms); for the flat MEETING_* triggers the booking's startTime / endTime,
// since their createdAt is when the booking was made.
func mapBody(body []byte) (providers.Mapped, error) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return providers.Mapped{}, providers.Unmappable("calcom body is not a JSON envelope (a custom payload template?): %v", err)
	}
	if err := providers.Token("triggerEvent", env.TriggerEvent); err != nil {
		return providers.Mapped{}, err
	}
	if err := providers.Token("createdAt", env.CreatedAt); err != nil {
		return providers.Mapped{}, err
	}
	created, err := providers.ParseTime("createdAt", env.CreatedAt)
	if err != nil {
		return providers.Mapped{}, err
	}
	switch env.TriggerEvent {
	case TriggerMeetingStarted, TriggerMeetingEnded:
		return mapMeeting(env)
	case TriggerNoShowUpdated:
		return mapNoShow(env, created)
	case TriggerBookingCreated, TriggerBookingRequested, TriggerBookingRejected, TriggerBookingCancelled, TriggerBookingRescheduled:
	default:
		return providers.Mapped{
			DeliveryID: deliveryID(env.TriggerEvent, bestEffortUID(env), env.CreatedAt),
			Reason:     "calcom trigger " + env.TriggerEvent + " not mapped",
		}, nil
	}

	if len(env.Payload) == 0 || string(env.Payload) == "null" {
		return providers.Mapped{}, providers.Unmappable("calcom %s: payload missing", env.TriggerEvent)
	}
	var b bookingPayload
	if err := json.Unmarshal(env.Payload, &b); err != nil {
		return providers.Mapped{}, providers.Unmappable("calcom %s: payload is not a booking: %v", env.TriggerEvent, err)
	}
	return mapBooking(env.TriggerEvent, env.CreatedAt, created, b)
}

// mapBooking maps one BOOKING_* fact about b. stamp completes the identity "<trigger> <uid> <stamp>"
// (the envelope's createdAt for a webhook) and created is the provider time of the fact: the API
// sync calls it with the stamps and times its booking objects carry (api.go).
func mapBooking(trigger, stamp string, created time.Time, b bookingPayload) (providers.Mapped, error) {
	env := envelope{TriggerEvent: trigger, CreatedAt: stamp}
	if err := providers.Token("payload.uid", b.UID); err != nil {
		return providers.Mapped{}, err
	}
	id := bookingID(b.UID)
	identity := env.TriggerEvent + " " + b.UID + " " + env.CreatedAt
	ev := func(identity string, id booking.ID, p booking.Payload) booking.Event {
		return booking.Event{
			ID: providers.EventID(Name, identity), Booking: id, Provider: Name,
			ProviderRef: identity, OccurredAt: created, Payload: p,
		}
	}
	out := providers.Mapped{DeliveryID: deliveryID(env.TriggerEvent, b.UID, env.CreatedAt)}

	switch env.TriggerEvent {
	case TriggerBookingCreated, TriggerBookingRequested, TriggerBookingRescheduled:
		s, capacity, err := slot(b)
		if err != nil {
			return providers.Mapped{}, err
		}
		if env.TriggerEvent == TriggerBookingRequested {
			out.Events = []booking.Event{ev(identity, id, booking.Requested{Slot: s, Capacity: capacity})}
			break
		}
		refs, err := paymentRefs(b.Metadata)
		if err != nil {
			return providers.Mapped{}, err
		}
		sch := booking.Scheduled{Slot: s, Capacity: capacity, PaymentRefs: refs}
		if env.TriggerEvent == TriggerBookingCreated {
			out.Events = []booking.Event{ev(identity, id, sch)}
			if b.seated() && len(b.Attendees) > 0 {
				// A seat create names the seated booking's uid and lists every attendee, the new one
				// last; attendeeSeatId is its seat.
				if st := seat(b.Attendees[len(b.Attendees)-1], b.AttendeeSeatID); !st.IsZero() {
					out.Events = []booking.Event{ev(identity, id, booking.SeatAdded{Slot: s, Capacity: capacity, Seat: st, PaymentRefs: refs})}
				}
			}
			break
		}
		// A reschedule is a new booking; Cal.com never sends BOOKING_CANCELLED for the old one, so the
		// cancel is implied here, with its own identity, linking both ways.
		if err := providers.Token("payload.rescheduleUid", b.RescheduleUID); err != nil {
			return providers.Mapped{}, err
		}
		if b.RescheduleUID == b.UID {
			return providers.Mapped{}, providers.Unmappable("calcom %s: rescheduleUid is the booking's own uid", env.TriggerEvent)
		}
		old := bookingID(b.RescheduleUID)
		sch.RescheduledFrom = old
		out.Events = []booking.Event{
			ev(identity, id, sch),
			ev(identity+" implied-cancel "+b.RescheduleUID, old, booking.Canceled{
				Reason: "rescheduled", CanceledBy: "provider", RescheduledTo: id, Implied: true,
			}),
		}
	case TriggerBookingCancelled:
		if b.seatCancel() {
			// One attendee left; the others keep the booking. Normally one attendee is listed; each
			// listed one leaves (an older Cal.com's cancel of a whole seated booking lists them all,
			// and the last one leaving cancels it).
			for i, a := range b.Attendees {
				ref := ""
				if len(b.Attendees) == 1 {
					ref = b.AttendeeSeatID
				}
				st := seat(a, ref)
				if st.IsZero() {
					continue
				}
				seatIdentity := identity
				if i > 0 {
					seatIdentity += " seat " + strconv.Itoa(i)
				}
				out.Events = append(out.Events, ev(seatIdentity, id, booking.SeatRemoved{Seat: st, Reason: strings.TrimSpace(b.CancellationReason)}))
			}
			if len(out.Events) > 0 {
				break
			}
		}
		out.Events = []booking.Event{ev(identity, id, booking.Canceled{
			Reason: strings.TrimSpace(b.CancellationReason), CanceledBy: canceledBy(b),
		})}
		if len(b.RecurringEvent) > 0 && string(b.RecurringEvent) != "null" {
			// "Cancel all remaining": Cal.com canceled every occurrence of the series from now on and
			// sends this one webhook; the calendar cancels the others.
			out.Events = append(out.Events, ev(identity+" series-cancel", id, booking.SeriesCanceled{
				Series: b.series(), CanceledBy: canceledBy(b),
			}))
		}
	case TriggerBookingRejected:
		out.Events = []booking.Event{ev(identity, id, booking.Rejected{Reason: strings.TrimSpace(b.RejectionReason)})}
	}
	if series := b.series(); series != "" && env.TriggerEvent != TriggerBookingCancelled && env.TriggerEvent != TriggerBookingRejected {
		if err := providers.Token("payload.recurringEventId", series); err != nil {
			return providers.Mapped{}, err
		}
		out.Events = append(out.Events, ev(identity+" series", id, booking.SeriesJoined{Series: "calcom-series-" + series}))
	}
	for i, e := range out.Events {
		if err := e.Booking.Validate(); err != nil {
			return providers.Mapped{}, providers.Unmappable("calcom %s: %v", env.TriggerEvent, err)
		}
		if p, ok := e.Payload.(booking.SeriesCanceled); ok && p.Series != "" {
			p.Series = "calcom-series-" + p.Series
			out.Events[i].Payload = p
		}
	}
	nameFacts(out.Events, env.TriggerEvent+" "+b.UID, env.CreatedAt)
	if env.TriggerEvent == TriggerBookingCancelled && b.seatCancel() {
		// The leaver is not the booking's contact: the booking's invitee stays who it was. The
		// leaver's own contact is kept by seat (their cancellation email goes to it).
		out.Contacts = seatContacts(id, b.Attendees, out.Events)
		return out, nil
	}
	if len(b.Attendees) > 0 && len(out.Events) > 0 {
		out.Contacts = providers.InZone(providers.NewContacts(id, b.Attendees[0].Email, b.Attendees[0].Name), b.Attendees[0].TimeZone)
		out.Contacts = append(out.Contacts, seatContacts(id, b.Attendees[len(b.Attendees)-1:], out.Events)...)
	}
	return out, nil
}

// seatContacts are the contacts of the seats the events add or remove, keyed by seat (booking.Seat.Key):
// each is the attendee whose digest the seat carries, else, when the seat has none, the only attendee
// listed.
func seatContacts(id booking.ID, attendees []person, events []booking.Event) []providers.Contact {
	var out []providers.Contact
	for _, e := range events {
		var st booking.Seat
		switch p := e.Payload.(type) {
		case booking.SeatAdded:
			st = p.Seat
		case booking.SeatRemoved:
			st = p.Seat
		default:
			continue
		}
		for _, a := range attendees {
			if st.Key() == "" || (st.Attendee != "" && seat(a, "").Attendee != st.Attendee) || (st.Attendee == "" && len(attendees) > 1) {
				continue
			}
			for _, c := range providers.InZone(providers.NewContacts(id, a.Email, a.Name), a.TimeZone) {
				c.Seat = st.Key()
				out = append(out, c)
			}
			break
		}
	}
	return out
}

// nameFacts gives each event of one BOOKING_* fact its Fact, "<trigger> <uid>" (with the seat for a
// seat's event), so that the same fact read from the API (stamp "api") and delivered by a webhook
// (stamp createdAt, the time of sending) is recorded once whichever comes first: the ledger compares
// the fact with the stored event's ProviderRef (booking.Event.SameFact). A seat's event has its own
// fact — several seats join one uid — and its identity is the fact and the stamp.
func nameFacts(events []booking.Event, fact, stamp string) {
	for i := range events {
		e := &events[i]
		e.Fact = fact
		if k := seatKey(e.Payload); k != "" {
			e.Fact += " seat " + k
			e.ProviderRef = e.Fact + " " + stamp
			e.ID = providers.EventID(Name, e.ProviderRef)
		}
	}
}

// seatKey names the seat of a seat's event ("" for other events): its seat reference, else its
// attendee key.
func seatKey(p booking.Payload) string {
	switch p := p.(type) {
	case booking.SeatAdded:
		return cmp.Or(p.Seat.UID, p.Seat.Attendee)
	case booking.SeatRemoved:
		return cmp.Or(p.Seat.UID, p.Seat.Attendee)
	}
	return ""
}

func deliveryID(trigger, uid, createdAt string) string {
	return "calcom:" + trigger + ":" + uid + ":" + createdAt
}

func bookingID(uid string) booking.ID { return booking.ID("calcom-" + uid) }

// bestEffortUID names the booking of a trigger we do not map, for a readable delivery id.
func bestEffortUID(env envelope) string {
	if env.UID != "" {
		return env.UID
	}
	var p struct {
		UID        string `json:"uid"`
		BookingUID string `json:"bookingUid"`
	}
	_ = json.Unmarshal(env.Payload, &p)
	if p.UID != "" {
		return p.UID
	}
	return p.BookingUID
}

func mapNoShow(env envelope, created time.Time) (providers.Mapped, error) {
	var p noShowPayload
	if len(env.Payload) == 0 || json.Unmarshal(env.Payload, &p) != nil {
		return providers.Mapped{}, providers.Unmappable("calcom %s: payload is not {bookingUid, attendees}", env.TriggerEvent)
	}
	if err := providers.Token("payload.bookingUid", p.BookingUID); err != nil {
		return providers.Mapped{}, err
	}
	var payload booking.Payload = booking.NoShowCleared{}
	for _, a := range p.Attendees {
		if a.NoShow {
			payload = booking.NoShowMarked{}
		}
	}
	identity := env.TriggerEvent + " " + p.BookingUID + " " + env.CreatedAt
	return oneEvent(env, p.BookingUID, identity, created, payload)
}

func mapMeeting(env envelope) (providers.Mapped, error) {
	m := meetingPayload{UID: env.UID, StartTime: env.StartTime, EndTime: env.EndTime}
	if m.UID == "" && len(env.Payload) > 0 {
		// Not the documented flat shape, but the same fields under payload carry the same meaning.
		if err := json.Unmarshal(env.Payload, &m); err != nil {
			return providers.Mapped{}, providers.Unmappable("calcom %s: payload is not a booking: %v", env.TriggerEvent, err)
		}
	}
	if err := providers.Token("uid", m.UID); err != nil {
		return providers.Mapped{}, err
	}
	field, value := "startTime", m.StartTime
	var payload booking.Payload = booking.MeetingStarted{}
	if env.TriggerEvent == TriggerMeetingEnded {
		field, value, payload = "endTime", m.EndTime, booking.MeetingEnded{}
	}
	at, err := providers.ParseTime(field, value)
	if err != nil {
		return providers.Mapped{}, err
	}
	identity := env.TriggerEvent + " " + m.UID + " " + env.CreatedAt
	return oneEvent(env, m.UID, identity, at, payload)
}

func oneEvent(env envelope, uid, identity string, at time.Time, p booking.Payload) (providers.Mapped, error) {
	id := bookingID(uid)
	if err := id.Validate(); err != nil {
		return providers.Mapped{}, providers.Unmappable("calcom %s: %v", env.TriggerEvent, err)
	}
	return providers.Mapped{
		DeliveryID: deliveryID(env.TriggerEvent, uid, env.CreatedAt),
		Events: []booking.Event{{
			ID: providers.EventID(Name, identity), Booking: id, Provider: Name,
			ProviderRef: identity, OccurredAt: at, Payload: p,
		}},
	}, nil
}

func slot(b bookingPayload) (booking.Slot, int, error) {
	meeting := b.ICalUID
	if meeting == "" {
		meeting = b.UID
	}
	if err := providers.Token("payload.iCalUID", meeting); err != nil {
		return booking.Slot{}, 0, err
	}
	host, err := resource(b.Organizer)
	if err != nil {
		return booking.Slot{}, 0, err
	}
	start, err := providers.ParseTime("payload.startTime", b.StartTime)
	if err != nil {
		return booking.Slot{}, 0, err
	}
	end, err := providers.ParseTime("payload.endTime", b.EndTime)
	if err != nil {
		return booking.Slot{}, 0, err
	}
	s := booking.Slot{Meeting: meeting, Resources: []string{host}, Start: start, End: end}
	if err := s.Validate(); err != nil {
		return booking.Slot{}, 0, providers.Unmappable("%v", err)
	}
	seats := 1
	if b.SeatsPerTimeSlot != nil {
		seats = *b.SeatsPerTimeSlot
	}
	capacity, err := providers.Capacity("payload.seatsPerTimeSlot", seats)
	if err != nil {
		return booking.Slot{}, 0, err
	}
	return s, capacity, nil
}

// resource names the organizer's calendar: "calcom-user-<id>", or, without an id, a digest of the
// e-mail address — events never store raw addresses.
func resource(o *person) (string, error) {
	switch {
	case o == nil:
		return "", providers.Unmappable("payload.organizer missing")
	case o.ID != "":
		if err := providers.Token("payload.organizer.id", o.ID.String()); err != nil {
			return "", err
		}
		return "calcom-user-" + o.ID.String(), nil
	case strings.TrimSpace(o.Email) != "":
		return "calcom-user-email-" + emailDigest(o.Email), nil
	}
	return "", providers.Unmappable("payload.organizer has neither id nor email")
}

func emailDigest(email string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(strings.TrimSpace(email))))
	return hex.EncodeToString(sum[:8])
}

// canceledBy classifies cancelledBy (an e-mail address) as host or invitee without keeping it.
func canceledBy(b bookingPayload) string {
	by := strings.TrimSpace(b.CancelledBy)
	if by == "" {
		return ""
	}
	if b.Organizer != nil && strings.EqualFold(by, strings.TrimSpace(b.Organizer.Email)) {
		return "host"
	}
	for _, a := range b.Attendees {
		if strings.EqualFold(by, strings.TrimSpace(a.Email)) {
			return "invitee"
		}
	}
	return ""
}

// paymentRefs reads metadata.externalId when it is a Stripe PaymentIntent. metadata is free-form
// (platform customers put their own keys there), so other shapes are not an error.
func paymentRefs(metadata json.RawMessage) ([]string, error) {
	var m map[string]any
	if len(metadata) == 0 || json.Unmarshal(metadata, &m) != nil {
		return nil, nil
	}
	ext, _ := m["externalId"].(string)
	if !strings.HasPrefix(ext, "pi_") {
		return nil, nil
	}
	if err := providers.Token("payload.metadata.externalId", ext); err != nil {
		return nil, err
	}
	return []string{"stripe:" + ext}, nil
}
