package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"bookingledger/adapters/eventcodec"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
)

// EmailSeatCancellation is one leaving attendee's own cancellation email, for a seated booking (Cal.com
// seats): one step per booking and seat (process_steps.seat), to that seat's contact (seat_contacts)
// and to nobody else. The booking's own steps follow the booking, not its attendees.
const EmailSeatCancellation Kind = "invitee_email.seat_cancellation"

// leaving is one attendee leaving a seated booking (a booking.SeatRemoved of a batch).
type leaving struct {
	booking string
	event   string // the event's ID, as the calendar's findings name it
	seat    string // booking.Seat.Key
}

// seatLeavings are the SeatRemoved events of a batch, in its order.
func seatLeavings(events []eventlog.RecordedEvent) ([]leaving, error) {
	var out []leaving
	for _, r := range events {
		if r.Type != string(booking.TypeSeatRemoved) {
			continue
		}
		e, err := eventcodec.JSON{}.Decode(r)
		if err != nil {
			return nil, fmt.Errorf("process: decode %s@%d: %w", r.StreamID, r.Version, err)
		}
		p, ok := e.Payload.(booking.SeatRemoved)
		if !ok || p.Seat.Key() == "" {
			continue
		}
		out = append(out, leaving{booking: string(e.Booking), event: e.ID.String(), seat: p.Seat.Key()})
	}
	return out, nil
}

// SeatStepKey is the key of the seat cancellation of seat (booking.Seat.Key) of booking b: one per
// booking and seat, whenever and however often its leaving is planned.
func SeatStepKey(b, seat string) uuid.UUID { return StepKey(b, EmailSeatCancellation, "seat "+seat) }

// planSeatCancellations plans, for each attendee leaving a seated booking in events, their own
// cancellation email: one step keyed by booking and seat (re-planning, a redelivery or a rebuild finds
// the key and adds nothing). A leaving the booking's fold did not take (a finding on the event: the
// seat was unknown, or the booking had already ended) plans nothing. Whether the step is sent, or left
// to the booking's own cancellation because the leaver is the booking's contact and the booking ended
// with them, is decided when it runs (seatSkip). It returns the ids of new steps.
func planSeatCancellations(ctx context.Context, tx pgx.Tx, events []eventlog.RecordedEvent, targets Targets) ([]int64, error) {
	if !targets.Email {
		return nil, nil
	}
	leavings, err := seatLeavings(events)
	if err != nil || len(leavings) == 0 {
		return nil, err
	}
	var ids []string
	for _, l := range leavings {
		if !slices.Contains(ids, l.booking) {
			ids = append(ids, l.booking)
		}
	}
	type calRow struct {
		resources  []string
		start, end *time.Time
		findings   []struct {
			Event string `json:"event"`
		}
	}
	rows := map[string]calRow{}
	r, err := tx.Query(ctx, `SELECT booking, resources, lower(during), upper(during), findings FROM calendar_bookings WHERE booking = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("process: read calendar rows of seats: %w", err)
	}
	for r.Next() {
		var b string
		var c calRow
		var findings []byte
		if err := r.Scan(&b, &c.resources, &c.start, &c.end, &findings); err != nil {
			r.Close()
			return nil, fmt.Errorf("process: read calendar rows of seats: %w", err)
		}
		if err := json.Unmarshal(findings, &c.findings); err != nil {
			r.Close()
			return nil, fmt.Errorf("process: read findings of %s: %w", b, err)
		}
		rows[b] = c
	}
	r.Close()
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("process: read calendar rows of seats: %w", err)
	}
	var jobs []int64
	batch := &pgx.Batch{}
	for _, l := range leavings {
		c, ok := rows[l.booking]
		if !ok || slices.ContainsFunc(c.findings, func(f struct {
			Event string `json:"event"`
		}) bool {
			return f.Event == l.event
		}) {
			continue
		}
		resource := ""
		if len(c.resources) > 0 {
			resource = c.resources[0]
		}
		var start, end *time.Time
		if c.start != nil && c.end != nil {
			start, end = c.start, c.end
		}
		batch.Queue(`INSERT INTO process_steps (key, kind, thread, booking, answers, resource, slot_start, slot_end, seat)
VALUES ($1, $2, $3, $3, $4, $5, $6, $7, $8) ON CONFLICT (key) DO NOTHING RETURNING id`,
			SeatStepKey(l.booking, l.seat), string(EmailSeatCancellation), l.booking, "seat "+l.seat+" left", resource, start, end, l.seat).
			QueryRow(func(row pgx.Row) error {
				var id int64
				err := row.Scan(&id)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil // planned before
				}
				if err == nil {
					jobs = append(jobs, id)
				}
				return err
			})
	}
	if batch.Len() == 0 {
		return nil, nil
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("process: plan seat cancellations: %w", err)
	}
	return jobs, nil
}

// seatSkip says, inside the claim's transaction (st locked), why a cancellation step of a seated
// booking must not run, so that each leaving attendee is told once: "" when it runs.
//
//   - A seat's cancellation whose attendee is the booking's contact (the same address), when the
//     booking is no longer active: the booking's own cancellation, to that contact, tells them.
//   - The booking's cancellation, when its contact already had their seat's cancellation (one that
//     was, or may have been, sent). It locks the booking's seat steps first, so that a seat's claim
//     that saw the booking still active and is about to send is waited for and seen.
func seatSkip(ctx context.Context, tx pgx.Tx, st Step, status *string) (string, error) {
	switch st.Kind {
	case EmailSeatCancellation:
		if status != nil && *status == "active" {
			return "", nil
		}
		var same bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM process_steps s
JOIN seat_contacts sc ON sc.booking = s.booking AND sc.seat = s.seat
JOIN contacts c ON c.booking = s.booking AND lower(c.email) = lower(sc.email)
WHERE s.id = $1)`, st.ID).Scan(&same)
		if err != nil {
			return "", fmt.Errorf("process: compare seat contact: %w", err)
		}
		if same {
			return fmt.Sprintf("booking %s is %s: its own cancellation tells this attendee, its contact", st.Booking, orNone(status)), nil
		}
		return "", nil
	case EmailCancellation:
		r, err := tx.Query(ctx, `SELECT s.key, s.state, coalesce(lower(sc.email) = lower(c.email), false)
FROM process_steps s
LEFT JOIN seat_contacts sc ON sc.booking = s.booking AND sc.seat = s.seat
LEFT JOIN contacts c ON c.booking = s.booking
WHERE s.booking = $1 AND s.kind = $2
ORDER BY s.id FOR UPDATE OF s`, st.Booking, string(EmailSeatCancellation))
		if err != nil {
			return "", fmt.Errorf("process: read seat steps: %w", err)
		}
		defer r.Close()
		var told []string
		for r.Next() {
			var key uuid.UUID
			var state string
			var same bool
			if err := r.Scan(&key, &state, &same); err != nil {
				return "", fmt.Errorf("process: read seat steps: %w", err)
			}
			if same && (Step{State: State(state)}).effected() {
				told = append(told, key.String())
			}
		}
		if err := r.Err(); err != nil {
			return "", fmt.Errorf("process: read seat steps: %w", err)
		}
		if len(told) > 0 {
			return "the booking's contact had their own seat cancellation (" + strings.Join(told, ", ") + "): not told twice", nil
		}
	}
	return "", nil
}

// contactSQL reads the recipient of an email step of kind ($1 the booking, $2 the step's id), with their
// time zone: a seat's cancellation goes to that seat's contact only, every other email to the
// booking's contact.
func contactSQL(kind Kind) string {
	if kind == EmailSeatCancellation {
		return `SELECT c.email, c.name, c.time_zone FROM process_steps s JOIN seat_contacts c ON c.booking = s.booking AND c.seat = s.seat
WHERE s.booking = $1 AND s.id = $2`
	}
	return `SELECT email, name, time_zone FROM contacts WHERE booking = $1 AND $2::bigint IS NOT NULL`
}
