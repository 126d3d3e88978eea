package readmodel

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/projections/calendar"
)

// TestBatchRowsReadBackAsCopied: the incremental batch writes calendar rows column by column through
// unnest (text[] columns as literals), the rebuild through COPY; both must store every value alike,
// and the batch's statement must replace a stored row in full. The values are the awkward ones: array
// elements with quotes, backslashes, commas, braces, spaces and the word NULL, empty arrays and texts,
// no slot, no times, findings.
func TestBatchRowsReadBackAsCopied(t *testing.T) {
	t.Parallel()
	PostgresOnly(t)
	pool := pgtest.NewDatabase(t)
	ctx := context.Background()
	event, err := eventlog.ParseEventID("00000000-0000-0000-0000-000000000007")
	require.NoError(t, err)
	start := time.Date(2027, 3, 1, 9, 0, 0, 123456000, time.UTC)
	rows := []calendar.Booking{{
		Booking: "calendly-odd", Provider: "calendly", Meeting: `m "1"`,
		Resources: []string{`a"b`, `c\d`, `e,f`, `{g}`, `NULL`, ` h `, ``, `ü`}, Start: start, End: start.Add(30 * time.Minute),
		Status: calendar.StatusActive, BookingStatus: booking.StatusActive, Holder: true, Payment: booking.PaymentStatus("paid"),
		PaymentRefs: []string{`pi_"x"`, `pi\y`}, PaymentStreams: []booking.ID{"stripe-pi_1", `stripe-{2}`}, Capacity: 3, NoShow: true,
		ScheduledAt: start.Add(-time.Hour), UpdatedAt: start.Add(-time.Minute), StreamVersion: 7, Events: 5,
		RescheduledFrom: "calendly-old", RescheduledTo: "calendly-new", CancelReason: `why, "not"`, CanceledBy: `\host`, CancelImplied: true,
		Findings: []booking.Finding{{Event: event, Type: booking.EventType("booking.canceled"), OccurredAt: start,
			Code: booking.FindingSuperseded, Reason: `a "reason"`}},
	}, {
		Booking: "calendly-bare", Provider: "calendly", Resources: []string{}, PaymentRefs: []string{},
		Status: calendar.Status("pending"),
	}}
	ids := []string{"calendly-odd", "calendly-bare"}

	_, err = pool.Exec(ctx, `CREATE TABLE calendar_bookings_copied (LIKE calendar_bookings INCLUDING ALL)`)
	require.NoError(t, err)
	write := func(rows []calendar.Booking) {
		t.Helper()
		columns, err := bookingArrays(rows)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, upsertBookingsSQL, columns...)
		require.NoError(t, err)
	}
	write(rows)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return copyBookings(ctx, tx, "calendar_bookings_copied", rows) }))

	written, err := loadBookingsFrom(ctx, pool, "calendar_bookings", ids)
	require.NoError(t, err)
	copied, err := loadBookingsFrom(ctx, pool, "calendar_bookings_copied", ids)
	require.NoError(t, err)
	require.Equal(t, copied, written)
	odd := written["calendly-odd"]
	require.Equal(t, rows[0].Resources, odd.Resources)
	require.Equal(t, rows[0].PaymentRefs, odd.PaymentRefs)
	require.Equal(t, rows[0].PaymentStreams, odd.PaymentStreams)
	require.Equal(t, rows[0].Findings, odd.Findings)
	require.True(t, odd.Start.Equal(start) && odd.End.Equal(start.Add(30*time.Minute)), "slot %v–%v", odd.Start, odd.End)
	require.Empty(t, written["calendly-bare"].Resources)
	require.False(t, written["calendly-bare"].HasSlot())

	// A second write replaces the stored rows in full, and stamps them anew.
	var before time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT projected_at FROM calendar_bookings WHERE booking = 'calendly-odd'`).Scan(&before))
	rows[0], rows[1] = rows[1], rows[0]
	rows[0].Booking, rows[1].Booking = rows[1].Booking, rows[0].Booking
	write(rows)
	swapped, err := loadBookingsFrom(ctx, pool, "calendar_bookings", ids)
	require.NoError(t, err)
	require.Equal(t, copied["calendly-bare"].Resources, swapped["calendly-odd"].Resources)
	require.False(t, swapped["calendly-odd"].HasSlot())
	require.Equal(t, odd.Resources, swapped["calendly-bare"].Resources)
	require.Equal(t, odd.Findings, swapped["calendly-bare"].Findings)
	var after time.Time
	require.NoError(t, pool.QueryRow(ctx, `SELECT projected_at FROM calendar_bookings WHERE booking = 'calendly-odd'`).Scan(&after))
	require.True(t, after.After(before), "projected_at %v, then %v", before, after)
}
