package stepstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bookingledger/adapters/process"
)

// EraseSteps is process_steps' part of an erasure (adapters/privacy), in its transaction: the
// subjects' pending invitee steps cannot run without the contact, so they are skipped and say why;
// their steps' errors, which can quote an address (an SMTP 550 names the mailbox), are cleared; a
// seated booking's host event that lists attendees gets an update that writes it without them. It
// returns how many steps it skipped and how many errors it cleared.
func EraseSteps(ctx context.Context, tx pgx.Tx, subjects []string, at time.Time) (skipped, cleared int64, err error) {
	tag, err := tx.Exec(ctx, `UPDATE process_steps SET state = $3, note = 'the invitee''s data was erased on ' || $2,
    finished_at = now(), updated_at = now()
WHERE booking = ANY($1) AND state = $4 AND kind LIKE 'invitee_email.%'`, subjects, at.Format(time.DateOnly), string(process.StateSkipped), string(process.StatePending))
	if err != nil {
		return 0, 0, fmt.Errorf("skip erased subjects' steps: %w", err)
	}
	skipped = tag.RowsAffected()
	tag, err = tx.Exec(ctx, `UPDATE process_steps SET last_error = '[erased]', updated_at = now() WHERE booking = ANY($1) AND last_error NOT IN ('', '[erased]')`, subjects)
	if err != nil {
		return skipped, 0, fmt.Errorf("clear erased subjects' step errors: %w", err)
	}
	// Host events that list the subjects' attendees are written again without them (attendees.go).
	if _, err := planErasedAttendees(ctx, tx, subjects); err != nil {
		return skipped, 0, err
	}
	return skipped, tag.RowsAffected(), nil
}
