package sample

import (
	"net/http"
	"time"

	"bookingledger/adapters/providers/calendly"
)

func calendlyKind() kind {
	return kind{
		events: []string{calendly.EventInviteeCreated, calendly.EventInviteeCanceled, calendly.EventNoShowCreated, calendly.EventNoShowDeleted},
		body:   calendlyBody,
		sign: func(secret string, body []byte, now time.Time) (http.Header, error) {
			h := http.Header{}
			h.Set(calendly.SignatureHeader, calendly.Sign(secret, now, body))
			return h, nil
		},
	}
}

// calendlyBody is a webhook v2 envelope around an invitee. The change times are fixed offsets from the
// meeting start (booked a week before, canceled six days before, no-show a quarter hour in), so that a
// create, cancel and no-show of one booking fold in that order.
func calendlyBody(event string, p Params) (any, error) {
	const api = "https://api.calendly.com"
	scheduledEvent := api + "/scheduled_events/" + token("calendly-event", p.Booking)
	invitee := scheduledEvent + "/invitees/" + p.Booking
	host := api + "/users/" + p.Host
	booked := p.Start.Add(-7 * 24 * time.Hour).Add(871243 * time.Microsecond)

	if !p.rescheduledAt.IsZero() && p.oldInvitee != "" {
		booked = p.rescheduledAt // the new invitee of a reschedule is made when the old one is canceled
	}
	changed := booked
	status := "active"
	var cancellation, noShow any
	switch event {
	case calendly.EventInviteeCanceled:
		changed = p.Start.Add(-6 * 24 * time.Hour).Add(337902 * time.Microsecond)
		if !p.rescheduledAt.IsZero() {
			changed = p.rescheduledAt
		}
		status = "canceled"
		cancellation = map[string]any{
			"canceled_by":   "Ada Lovelace",
			"canceler_type": "invitee",
			"reason":        "Schedule conflict",
			"created_at":    changed.Format(micros),
		}
	case calendly.EventNoShowCreated, calendly.EventNoShowDeleted:
		changed = p.Start.Add(15 * time.Minute).Add(918236 * time.Microsecond)
		if event == calendly.EventNoShowDeleted {
			changed = changed.Add(5 * time.Minute)
		}
		noShow = map[string]any{
			"uri":        api + "/invitee_no_shows/" + token("calendly-no-show", p.Booking),
			"created_at": p.Start.Add(15 * time.Minute).Add(918236 * time.Microsecond).Format(micros),
		}
	}
	eventStatus := "active"
	if status == "canceled" {
		eventStatus = "canceled"
	}
	return map[string]any{
		"event":      event,
		"created_at": changed.Truncate(time.Second).Add(time.Second).Format(micros),
		"created_by": host,
		"payload": map[string]any{
			"uri":                     invitee,
			"event":                   scheduledEvent,
			"status":                  status,
			"email":                   "ada.lovelace@example.com",
			"name":                    "Ada Lovelace",
			"first_name":              nil,
			"last_name":               nil,
			"timezone":                p.TimeZone,
			"rescheduled":             p.newInvitee != "",
			"old_invitee":             orNil(p.oldInvitee),
			"new_invitee":             orNil(p.newInvitee),
			"cancellation":            cancellation,
			"no_show":                 noShow,
			"payment":                 nil,
			"reconfirmation":          nil,
			"routing_form_submission": nil,
			"questions_and_answers": []any{map[string]any{
				"position": 0,
				"question": "Please share anything that will help prepare for our meeting.",
				"answer":   "Reviewing the analytical engine schedule.",
			}},
			"cancel_url":     "https://calendly.com/cancellations/" + p.Booking,
			"reschedule_url": "https://calendly.com/reschedulings/" + p.Booking,
			"created_at":     booked.Format(micros),
			"updated_at":     changed.Format(micros),
			"scheduled_event": map[string]any{
				"uri":        scheduledEvent,
				"name":       "30 Minute Consultation",
				"status":     eventStatus,
				"start_time": p.Start.Format(micros),
				"end_time":   p.End.Format(micros),
				"event_type": api + "/event_types/" + token("calendly-event-type", p.Host),
				"location": map[string]any{
					"type":     "zoom",
					"status":   "pushed",
					"join_url": "https://calendly.zoom.us/j/81234567890",
				},
				"invitees_counter": map[string]any{"total": 1, "active": map[bool]int{true: 0, false: 1}[status == "canceled"], "limit": 1},
				"event_memberships": []any{map[string]any{
					"user":       host,
					"user_email": "grace.hopper@example.com",
					"user_name":  "Grace Hopper",
				}},
				"event_guests": []any{},
				"created_at":   booked.Add(-69 * time.Millisecond).Format(micros),
				"updated_at":   changed.Format(micros),
			},
		},
	}, nil
}

func orNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}
