package readmodel_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"bookingledger/projections/calendar"
)

// snapshot is everything the read side shows, minus what legitimately differs between two databases
// (wall-clock times and serial ids).
type snapshot struct {
	Bookings []calendar.Booking
	Slots    []string
	Payments []string
	Refs     []string
	Links    []string
	Open     []string
	Calendar []calendar.CalendarEntry
}

func snapshotOf(t testing.TB, e *env) snapshot {
	t.Helper()
	ctx := context.Background()
	var s snapshot
	var err error
	s.Bookings, err = e.rm.Bookings(ctx)
	require.NoError(t, err)
	s.Slots = queryStrings(t, e, `SELECT format('%s %s %s %s %s %s', booking, resource, meeting, during, priority_at, holder)
FROM calendar_slots ORDER BY booking, resource`)
	s.Payments = queryStrings(t, e, `SELECT format('%s %s %s %s', stream, refs, payment_status, stream_version) FROM payment_streams ORDER BY stream`)
	s.Refs = queryStrings(t, e, `SELECT 'booking ' || booking || ' ' || ref FROM calendar_booking_refs
UNION ALL SELECT 'stream ' || stream || ' ' || ref FROM payment_stream_refs ORDER BY 1`)
	s.Links = queryStrings(t, e, `SELECT resource || ' -> ' || name FROM calendar_resource_links ORDER BY resource`)
	items, err := e.rm.OpenItems(ctx)
	require.NoError(t, err)
	for _, it := range items {
		s.Open = append(s.Open, fmt.Sprintf("%s|%s|%s|%s|%s|%s", it.Kind, it.Subject, it.Booking, it.OtherBooking, it.EventID, it.Reason))
	}
	slices.Sort(s.Open)
	page, err := e.rm.Calendar(ctx, calendar.CalendarQuery{From: day.AddDate(0, 0, -3), To: day.AddDate(0, 0, 3), Limit: calendar.MaxCalendarPage})
	require.NoError(t, err)
	require.False(t, page.More, "the snapshot fits one page")
	s.Calendar = page.Entries
	return s
}

func queryStrings(t testing.TB, e *env, sql string) []string {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), sql)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}
