package stepstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/process"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/projections/steps"
)

// planSeatCancellations plans, for each attendee leaving a seated booking in events, their own
// cancellation email (steps.SeatCancellations), reading the bookings' calendar rows through cal. It
// returns the ids of new steps.
func planSeatCancellations(ctx context.Context, tx pgx.Tx, cal CalendarReader, events []eventlog.RecordedEvent, targets process.Targets) ([]int64, error) {
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
