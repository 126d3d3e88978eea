package sample

import (
	"crypto/sha256"
	"encoding/binary"
	"net/http"
	"time"

	"bookingledger/adapters/providers/calcom"
)

// CalcomWebhookVersion is the X-Cal-Webhook-Version the samples carry.
const CalcomWebhookVersion = "2021-10-20"

func calcomKind() kind {
	return kind{
		events: []string{calcom.TriggerBookingCreated, calcom.TriggerBookingCancelled, calcom.TriggerBookingRescheduled,
			calcom.TriggerBookingRequested, calcom.TriggerBookingRejected},
		body: calcomBody,
		sign: func(secret string, body []byte, _ time.Time) (http.Header, error) {
			h := http.Header{}
			h.Set(calcom.SignatureHeader, calcom.Sign(secret, body))
			h.Set(calcom.VersionHeader, CalcomWebhookVersion)
			return h, nil
		},
	}
}

// CalcomRescheduledUID is the uid of the new booking a BOOKING_RESCHEDULED sample of booking creates:
// Cal.com gives a rescheduled booking a new uid and names the old one in rescheduleUid.
func CalcomRescheduledUID(booking string) string { return booking + "-rescheduled" }

// calcomBody builds a Cal.com envelope. --booking is the uid; BOOKING_RESCHEDULED moves that booking to
// p.Start under the new uid CalcomRescheduledUID(booking). The change times are fixed offsets from the
// start: requested 7 days and a minute before, created 7 days before, rejected and cancelled 6 days
// before, rescheduled 5 days before.
func calcomBody(event string, p Params) (any, error) {
	uid := p.Booking
	iCalSequence := 0
	status := "ACCEPTED"
	created := p.Start.Add(-7 * 24 * time.Hour).Add(482 * time.Millisecond)
	extra := map[string]any{}
	switch event {
	case calcom.TriggerBookingRequested:
		created = created.Add(-time.Minute)
		status = "PENDING"
		extra["requiresConfirmation"] = true
	case calcom.TriggerBookingRejected:
		created = p.Start.Add(-6 * 24 * time.Hour).Add(211 * time.Millisecond)
		status = "REJECTED"
		extra["rejectionReason"] = "Fully booked that week"
		extra["requiresConfirmation"] = true
	case calcom.TriggerBookingCancelled:
		created = p.Start.Add(-6 * 24 * time.Hour).Add(337 * time.Millisecond)
		status = "CANCELLED"
		extra["cancellationReason"] = "Something came up"
		extra["cancelledBy"] = "ada.lovelace@example.com"
	case calcom.TriggerBookingRescheduled:
		created = p.Start.Add(-5 * 24 * time.Hour).Add(905 * time.Millisecond)
		uid = CalcomRescheduledUID(p.Booking)
		iCalSequence = 1
		extra["rescheduleUid"] = p.Booking
		extra["rescheduleId"] = calcomNumber("booking", p.Booking)
		extra["rescheduledBy"] = "ada.lovelace@example.com"
	}
	payload := map[string]any{
		"type":            "30min",
		"title":           "30 Min Meeting between Grace Hopper and Ada Lovelace",
		"description":     "",
		"additionalNotes": "Agenda: analytical engine",
		"customInputs":    map[string]any{},
		"startTime":       p.Start.Format(millis),
		"endTime":         p.End.Format(millis),
		"organizer": map[string]any{
			"id":         calcomNumber("user", p.Host),
			"name":       "Grace Hopper",
			"email":      "grace.hopper@example.com",
			"username":   p.Host,
			"timeZone":   "America/New_York",
			"language":   map[string]any{"locale": "en"},
			"timeFormat": "h:mma",
		},
		"responses": map[string]any{
			"name":  map[string]any{"label": "your_name", "value": "Ada Lovelace"},
			"email": map[string]any{"label": "email_address", "value": "ada.lovelace@example.com"},
		},
		"attendees": []any{map[string]any{
			"email":     "ada.lovelace@example.com",
			"name":      "Ada Lovelace",
			"firstName": "Ada",
			"lastName":  "Lovelace",
			"timeZone":  p.TimeZone,
			"language":  map[string]any{"locale": "en"},
		}},
		"location":         "integrations:daily",
		"eventTypeId":      calcomNumber("event-type", p.Host),
		"seatsPerTimeSlot": nil,
		"iCalUID":          p.Booking + "@Cal.com",
		"iCalSequence":     iCalSequence,
		"uid":              uid,
		"bookingId":        calcomNumber("booking", uid),
		"eventTitle":       "30 Min Meeting",
		"length":           int(p.End.Sub(p.Start) / time.Minute),
		"metadata":         map[string]any{"videoCallUrl": "https://app.cal.com/video/" + uid},
		"status":           status,
	}
	for k, v := range extra {
		payload[k] = v
	}
	return map[string]any{
		"triggerEvent": event,
		"createdAt":    created.Format(millis),
		"payload":      payload,
	}, nil
}

// calcomNumber derives a stable numeric id (Cal.com's ids are integers).
func calcomNumber(kind, key string) uint32 {
	sum := sha256.Sum256([]byte("calcom-" + kind + "\x00" + key))
	return 1000 + binary.BigEndian.Uint32(sum[:4])%9_000_000
}
