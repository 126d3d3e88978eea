package process

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"bookingledger/domain/ledger"
)

// ContactReader reads the invitees' addresses, which their owner saves with the deliveries
// (postgres.Contacts implements it).
type ContactReader interface {
	// Attendees returns the contacts of a seated booking's seats, keyed by seat ("" the booking's own
	// contact, for a seat known only by number); a seat without one is absent.
	Attendees(ctx context.Context, booking string, seats []string) (map[string]ledger.Contact, error)
	// QueueContact queues on b the read of the booking's contact, or with seat, that seat's attendee
	// (and nobody else's address), with their time zone, which an email step's claim sends after its
	// COMMIT, in its second round trip. Its outcome lands in into, found (false when none is known) and
	// readErr as b runs, and b goes on whatever it is.
	QueueContact(b *pgx.Batch, booking, seat string, into *ledger.Contact, found *bool, readErr *error)
	// SeatsOfContact returns those of seats whose attendee has the booking's contact's address, in tx.
	SeatsOfContact(ctx context.Context, tx pgx.Tx, booking string, seats []string) ([]string, error)
}

// seatSkip says, inside the claim's transaction (st locked), why a cancellation step of a seated
// booking must not run, so that each leaving attendee is told once: "" when it runs.
//
//   - A seat's cancellation whose attendee is the booking's contact (the same address), when the
//     booking is no longer active: the booking's own cancellation, to that contact, tells them.
//   - The booking's cancellation, when its contact already had their seat's cancellation (one that
//     was, or may have been, sent). It locks the booking's seat steps first, so that a seat's claim
//     that saw the booking still active and is about to send is waited for and seen.
func (w *Worker) seatSkip(ctx context.Context, tx pgx.Tx, st Step, status *string) (string, error) {
	contacts := w.cfg.Contacts
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
		seated, err := w.cfg.Steps.SeatSteps(ctx, tx, st.Booking)
		if err != nil {
			return "", fmt.Errorf("process: read seat steps: %w", err)
		}
		var effected []string
		for _, s := range seated {
			if s.State.Effected() {
				effected = append(effected, s.Seat)
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
			if s.State.Effected() && slices.Contains(same, s.Seat) {
				told = append(told, s.Key.String())
			}
		}
		if len(told) > 0 {
			return "the booking's contact had their own seat cancellation (" + strings.Join(told, ", ") + "): not told twice", nil
		}
	}
	return "", nil
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
