package calcom

import (
	"encoding/json"
	"time"

	"bookingledger/adapters/providers"
)

// apiBooking is a booking of GET /bookings (cal-api-version 2024-08-13): the fields the mapping
// needs; titles, descriptions and answers are not decoded.
type apiBooking struct {
	UID                string          `json:"uid"`
	Status             string          `json:"status"`
	Start              string          `json:"start"`
	End                string          `json:"end"`
	Hosts              []person        `json:"hosts"`
	Attendees          []person        `json:"attendees"`
	CancellationReason string          `json:"cancellationReason"`
	CancelledByEmail   string          `json:"cancelledByEmail"`
	RescheduledFromUID string          `json:"rescheduledFromUid"`
	RescheduledToUID   string          `json:"rescheduledToUid"`
	CreatedAt          string          `json:"createdAt"`
	UpdatedAt          *string         `json:"updatedAt"`
	Metadata           json.RawMessage `json:"metadata"`
	IcsUID             string          `json:"icsUid"`
}

// Booking statuses of API v2.
const (
	apiAccepted  = "accepted"
	apiCancelled = "cancelled"
	apiRejected  = "rejected"
	apiPending   = "pending"
)

// apiStamp completes the identity of every event the sync maps: "<trigger> <uid> api". The webhook's
// third part, the envelope's createdAt, is when Cal.com sent the webhook and appears nowhere in the
// API's booking, so the sync cannot derive the webhook's event IDs. Each trigger happens to a uid at
// most once (a reschedule makes a new uid), so the trigger and the uid name the fact; the stamp keeps
// these identities apart from any webhook's.
const apiStamp = "api"

// payload builds the webhook's payload struct from the API booking, so that both go through the same
// mapping (mapBooking). The organizer is the first host. seatsPerTimeSlot is not in the API's booking
// (it belongs to the event type): capacity is then 1.
func (b apiBooking) payload() bookingPayload {
	p := bookingPayload{
		UID: b.UID, StartTime: b.Start, EndTime: b.End, Attendees: b.Attendees, ICalUID: b.IcsUID,
		RescheduleUID: b.RescheduledFromUID, CancellationReason: b.CancellationReason,
		CancelledBy: b.CancelledByEmail, Metadata: b.Metadata,
	}
	if len(b.Hosts) > 0 {
		h := b.Hosts[0]
		p.Organizer = &h
	}
	return p
}

// fact is one webhook the booking's state stands for.
type fact struct {
	trigger string
	at      time.Time
}

// facts lists what the webhooks for the booking's state would have carried, in order: its creation
// (BOOKING_RESCHEDULED when it was rescheduled from another booking, BOOKING_REQUESTED when it awaits
// or was refused confirmation), then its end. A booking cancelled by a reschedule gets no cancel of
// its own: Cal.com sends none, the implied cancel comes with its successor (read by the sync too).
func (b apiBooking) facts() ([]fact, error) {
	created, err := providers.ParseTime("createdAt", b.CreatedAt)
	if err != nil {
		return nil, err
	}
	changed := created
	if b.UpdatedAt != nil && *b.UpdatedAt != "" {
		// The API keeps no cancellation or rejection time: the last change is the closest Cal.com gives.
		if u, err := providers.ParseTime("updatedAt", *b.UpdatedAt); err == nil && u.After(created) {
			changed = u
		}
	}
	creation := TriggerBookingCreated
	if b.RescheduledFromUID != "" {
		creation = TriggerBookingRescheduled
	}
	switch b.Status {
	case apiAccepted:
		return []fact{{creation, created}}, nil
	case apiPending:
		return []fact{{TriggerBookingRequested, created}}, nil
	case apiRejected:
		return []fact{{TriggerBookingRequested, created}, {TriggerBookingRejected, changed}}, nil
	case apiCancelled:
		if b.RescheduledToUID != "" {
			return []fact{{creation, created}}, nil
		}
		return []fact{{creation, created}, {TriggerBookingCancelled, changed}}, nil
	}
	return nil, nil
}

// item maps one API booking as its webhooks would be mapped. raw is the booking as returned.
func item(raw json.RawMessage) providers.SyncItem {
	var b apiBooking
	it := providers.SyncItem{Body: raw}
	if err := json.Unmarshal(raw, &b); err != nil {
		it.Ref = "booking ?"
		it.Err = providers.Unmappable("calcom API booking is not an object: %v", err)
		return it
	}
	if err := providers.Token("uid", b.UID); err != nil {
		it.Ref, it.Err = "booking ?", err
		return it
	}
	it.Ref = "booking " + b.UID
	facts, err := b.facts()
	if err != nil {
		it.Err = err
		return it
	}
	it.Mapped.DeliveryID = "calcom:api:" + b.UID + ":" + b.Status
	if len(facts) == 0 {
		it.Mapped.Reason = "calcom booking status " + providers.Clip(b.Status) + " not mapped"
		return it
	}
	p := b.payload()
	for _, f := range facts {
		m, err := mapBooking(f.trigger, apiStamp, f.at, p)
		if err != nil {
			it.Err = err
			it.Mapped = providers.Mapped{DeliveryID: it.Mapped.DeliveryID}
			return it
		}
		it.Mapped.Events = append(it.Mapped.Events, m.Events...)
		if it.Mapped.Contacts == nil {
			it.Mapped.Contacts = m.Contacts
		}
	}
	return it
}
