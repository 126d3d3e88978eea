package calcomapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// delivery is the part of a Cal.com webhook body the fake records.
type delivery struct {
	TriggerEvent string `json:"triggerEvent"`
	CreatedAt    string `json:"createdAt"`
	Payload      struct {
		UID                string `json:"uid"`
		StartTime          string `json:"startTime"`
		EndTime            string `json:"endTime"`
		ICalUID            string `json:"iCalUID"`
		RescheduleUID      string `json:"rescheduleUid"`
		CancellationReason string `json:"cancellationReason"`
		CancelledBy        string `json:"cancelledBy"`
		Organizer          struct {
			ID    json.Number `json:"id"`
			Name  string      `json:"name"`
			Email string      `json:"email"`
		} `json:"organizer"`
		Attendees []struct {
			Name  string `json:"name"`
			Email string `json:"email"`
		} `json:"attendees"`
		Metadata    map[string]any `json:"metadata"`
		EventTypeID int            `json:"eventTypeId"`
	} `json:"payload"`
}

// Record changes the fake's bookings as the Cal.com webhook body says they changed (BOOKING_CREATED,
// _REQUESTED, _REJECTED, _CANCELLED, _RESCHEDULED), at the body's createdAt: what a developer's
// `bookingledger send calcom …` describes is then also what the API answers.
func (s *Server) Record(body []byte) error {
	var d delivery
	if err := json.Unmarshal(body, &d); err != nil {
		return fmt.Errorf("calcom api fake: body is not a Cal.com webhook: %w", err)
	}
	at, err := time.Parse(time.RFC3339Nano, d.CreatedAt)
	if err != nil {
		return fmt.Errorf("calcom api fake: createdAt: %w", err)
	}
	b, err := d.booking(at)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch d.TriggerEvent {
	case "BOOKING_CREATED", "BOOKING_REQUESTED":
		if d.TriggerEvent == "BOOKING_REQUESTED" {
			b.Status = StatusPending
		}
		if s.byUID[b.UID] != nil { // a confirmed request
			return s.change(b.UID, at, func(x *Booking) { x.Status = b.Status })
		}
		_, err = s.add(b)
	case "BOOKING_REJECTED":
		err = s.upsert(b, at, func(x *Booking) { x.Status = StatusRejected })
	case "BOOKING_CANCELLED":
		err = s.upsert(b, at, func(x *Booking) {
			x.Status, x.CancellationReason, x.CancelledByEmail = StatusCancelled, d.Payload.CancellationReason, d.Payload.CancelledBy
		})
	case "BOOKING_RESCHEDULED":
		if s.byUID[d.Payload.RescheduleUID] == nil {
			return fmt.Errorf("%w: %s (send its BOOKING_CREATED first)", ErrNoBooking, d.Payload.RescheduleUID)
		}
		_, err = s.reschedule(d.Payload.RescheduleUID, b.UID, b.Start, b.End, at)
	default:
		return fmt.Errorf("calcom api fake: trigger %q changes no booking", d.TriggerEvent)
	}
	return err
}

func (s *Server) upsert(b Booking, at time.Time, f func(*Booking)) error {
	if s.byUID[b.UID] == nil {
		if _, err := s.add(b); err != nil {
			return err
		}
	}
	return s.change(b.UID, at, f)
}

func (d delivery) booking(at time.Time) (Booking, error) {
	p := d.Payload
	start, err1 := time.Parse(time.RFC3339Nano, p.StartTime)
	end, err2 := time.Parse(time.RFC3339Nano, p.EndTime)
	if p.UID == "" || errors.Join(err1, err2) != nil {
		return Booking{}, errors.New("calcom api fake: payload needs uid, startTime and endTime")
	}
	id, _ := strconv.Atoi(p.Organizer.ID.String())
	b := Booking{
		UID: p.UID, Start: start.UTC(), End: end.UTC(), ICSUID: p.ICalUID,
		Host:      Person{ID: id, Name: p.Organizer.Name, Email: p.Organizer.Email},
		CreatedAt: at, UpdatedAt: at, EventTypeID: p.EventTypeID, Metadata: map[string]string{},
	}
	for _, a := range p.Attendees {
		b.Attendees = append(b.Attendees, Person{Name: a.Name, Email: a.Email})
	}
	for k, v := range p.Metadata {
		if s, ok := v.(string); ok {
			b.Metadata[k] = s
		}
	}
	return b, nil
}

// delivery answers POST /_fake/deliveries: the raw body of a Cal.com webhook.
func (s *Server) delivery(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	var raw json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
		http.Error(w, "body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := s.Record(raw); err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
