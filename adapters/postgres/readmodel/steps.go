package readmodel

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/domain/eventlog"
	"bookingledger/projections/steps"
)

// StepReader is what the process steps read of the calendar (stepstore and process declare what they
// use: stepstore.CalendarReader for the projection, process.SlotReader for the workers): the
// calendar's checkpoint and the rows of bookings, with the bookings that share their slots or
// series. The reads that take a transaction run in the caller's.
type StepReader struct{ pool *pgxpool.Pool }

// NewStepReader returns the reader of the calendar on pool.
func NewStepReader(pool *pgxpool.Pool) *StepReader { return &StepReader{pool: pool} }

// Checkpoint is the calendar projection's saved position, and whether it is rebuilding.
func (r *StepReader) Checkpoint(ctx context.Context) (eventlog.Position, bool, error) {
	cp, err := checkpoint.Read(ctx, r.pool, ProjectionName)
	return cp.Position, cp.Rebuilding, err
}

// Rows returns the calendar rows of those of ids the calendar has.
func (r *StepReader) Rows(ctx context.Context, tx pgx.Tx, ids []string) ([]steps.Row, error) {
	q, err := tx.Query(ctx, `SELECT booking, status, resources, lower(during), upper(during), rescheduled_from, rescheduled_to, series, seats,
    seats_left, seats_left IS NOT NULL
FROM calendar_bookings WHERE booking = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(q, func(row pgx.CollectableRow) (b steps.Row, err error) {
		var start, end *time.Time
		err = row.Scan(&b.ID, &b.Status, &b.Resources, &start, &end, &b.From, &b.To, &b.Series, &b.Seats, &b.Left, &b.LeftKnown)
		b.Start, b.End = rowSlot(start, end)
		b.Seated = b.Seats != nil
		return b, err
	})
}

// Sharing returns the bookings whose claims overlap the slots of ids on the same resources.
func (r *StepReader) Sharing(ctx context.Context, tx pgx.Tx, ids []string) ([]string, error) {
	return collectStrings(ctx, tx, `SELECT DISTINCT s.booking FROM calendar_bookings b
JOIN calendar_resources r ON r.resource = ANY(b.resources)
CROSS JOIN LATERAL bl_overlapping_claims(r.id, b.during) s(booking)
WHERE b.booking = ANY($1) AND b.during IS NOT NULL`, ids)
}

// Occurrences returns the bookings of the series. The non-empty test repeats the partial index's
// predicate.
func (r *StepReader) Occurrences(ctx context.Context, tx pgx.Tx, series []string) ([]string, error) {
	return collectStrings(ctx, tx, `SELECT booking FROM calendar_bookings WHERE series = ANY($1) AND series <> ''`, series)
}

// Slot returns booking's calendar row (its status, slot and seats); ok is false when the calendar has none.
func (r *StepReader) Slot(ctx context.Context, tx pgx.Tx, booking string) (steps.Booking, bool, error) {
	var b steps.Booking
	var found bool
	err := scanSlot(tx.QueryRow(ctx, slotSQL, booking), booking, &b, &found)
	return b, found, err
}

// QueueSlot implements process.SlotReader: Slot's read, queued on b.
func (r *StepReader) QueueSlot(b *pgx.Batch, booking string, into *steps.Booking, found *bool) {
	b.Queue(slotSQL, booking).QueryRow(func(row pgx.Row) error { return scanSlot(row, booking, into, found) })
}

const slotSQL = `SELECT status, lower(during), upper(during), seats FROM calendar_bookings WHERE booking = $1`

func scanSlot(row pgx.Row, booking string, into *steps.Booking, found *bool) error {
	*into = steps.Booking{ID: booking}
	var start, end *time.Time
	err := row.Scan(&into.Status, &start, &end, &into.Seats)
	if *found = err == nil; errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	into.Start, into.End = rowSlot(start, end)
	into.Seated = into.Seats != nil
	return err
}

// rowSlot is a row's slot in UTC: zero unless both ends are known.
func rowSlot(start, end *time.Time) (time.Time, time.Time) {
	if start == nil || end == nil {
		return time.Time{}, time.Time{}
	}
	return start.UTC(), end.UTC()
}

func collectStrings(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([]string, error) {
	q, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(q, pgx.RowTo[string])
}

// Resources returns every resource the calendar has seen, in order: those `steps setup` prepares a
// calendar for.
func (r *StepReader) Resources(ctx context.Context) ([]string, error) {
	q, err := r.pool.Query(ctx, `SELECT resource FROM calendar_resources ORDER BY resource`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(q, pgx.RowTo[string])
}
