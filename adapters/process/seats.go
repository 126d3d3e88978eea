package process

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"bookingledger/adapters/eventcodec"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
	"bookingledger/projections/steps"
)

// ContactReader reads the invitees' addresses, which their owner saves with the deliveries
// (postgres.Contacts implements it).
type ContactReader interface {
	// Contact returns the booking's contact, or with seat, that seat's attendee (and nobody else's
	// address), with their time zone; ok is false when none is known.
	Contact(ctx context.Context, booking, seat string) (c ledger.Contact, ok bool, err error)
	// SeatsOfContact returns those of seats whose attendee has the booking's contact's address, in tx.
	SeatsOfContact(ctx context.Context, tx pgx.Tx, booking string, seats []string) ([]string, error)
}

// planSeatCancellations plans, for each attendee leaving a seated booking in events, their own
// cancellation email (steps.SeatCancellations), reading the bookings' calendar rows through cal. It
// returns the ids of new steps.
func planSeatCancellations(ctx context.Context, tx pgx.Tx, cal CalendarReader, events []eventlog.RecordedEvent, targets Targets) ([]int64, error) {
	if !targets.Email {
		return nil, nil
	}
	var removed []booking.Event
	for _, r := range events {
		if r.Type != string(booking.TypeSeatRemoved) {
			continue
		}
		e, err := eventcodec.JSON{}.Decode(r)
		if err != nil {
			return nil, fmt.Errorf("process: decode %s@%d: %w", r.StreamID, r.Version, err)
		}
		removed = append(removed, e)
	}
	leavings := steps.Leavings(removed)
	if len(leavings) == 0 {
		return nil, nil
	}
	read, err := cal.Findings(ctx, tx, steps.LeavingBookings(leavings))
	if err != nil {
		return nil, fmt.Errorf("process: read calendar rows of seats: %w", err)
	}
	rows := steps.Rows{}
	rows.Add(nil, read)
	var jobs []int64
	batch := &pgx.Batch{}
	queuePlan(batch, steps.Plan{Insert: steps.SeatCancellations(leavings, rows)}, &jobs)
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
func seatSkip(ctx context.Context, tx pgx.Tx, contacts ContactReader, st Step, status *string) (string, error) {
	switch st.Kind {
	case EmailSeatCancellation:
		if status != nil && *status == "active" {
			return "", nil
		}
		same, err := contacts.SeatsOfContact(ctx, tx, st.Booking, []string{st.Seat})
		if err != nil {
			return "", fmt.Errorf("process: compare seat contact: %w", err)
		}
		if len(same) > 0 {
			return fmt.Sprintf("booking %s is %s: its own cancellation tells this attendee, its contact", st.Booking, orNone(status)), nil
		}
		return "", nil
	case EmailCancellation:
		r, err := tx.Query(ctx, `SELECT key, state, seat FROM process_steps WHERE booking = $1 AND kind = $2 ORDER BY id FOR UPDATE`,
			st.Booking, string(EmailSeatCancellation))
		if err != nil {
			return "", fmt.Errorf("process: read seat steps: %w", err)
		}
		type seatStep struct {
			key         uuid.UUID
			state, seat string
		}
		seated, err := pgx.CollectRows(r, func(row pgx.CollectableRow) (s seatStep, err error) {
			return s, row.Scan(&s.key, &s.state, &s.seat)
		})
		if err != nil {
			return "", fmt.Errorf("process: read seat steps: %w", err)
		}
		var effected []string
		for _, s := range seated {
			if State(s.state).Effected() {
				effected = append(effected, s.seat)
			}
		}
		if len(effected) == 0 {
			return "", nil
		}
		same, err := contacts.SeatsOfContact(ctx, tx, st.Booking, effected)
		if err != nil {
			return "", fmt.Errorf("process: compare seat contacts: %w", err)
		}
		var told []string
		for _, s := range seated {
			if State(s.state).Effected() && slices.Contains(same, s.seat) {
				told = append(told, s.key.String())
			}
		}
		if len(told) > 0 {
			return "the booking's contact had their own seat cancellation (" + strings.Join(told, ", ") + "): not told twice", nil
		}
	}
	return "", nil
}
