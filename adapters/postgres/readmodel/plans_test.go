package readmodel

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/pgtest/plantest"
)

// TestScopedQueriesStayIndexed guards the cost of the queries that run per incremental batch and per
// calendar request: it must follow the batch (or the window), not the size of the calendar. pgx
// prepares statements and PostgreSQL switches to a generic plan after a few executions, and a generic
// plan cannot use an index behind "$1 OR …" or a partial index whose predicate only the parameter
// values imply. With plan_cache_mode = force_generic_plan over a calendar of a few thousand rows, no
// plan may read a growing table except through an index condition (a whole-table or whole-index walk
// fails the test).
func TestScopedQueriesStayIndexed(t *testing.T) {
	t.Parallel()
	PostgresOnly(t)
	conn := plantest.Connect(t, filledCalendar(t), batchPlanning...)
	scope := []string{"b-7", "b-8", "b-9"}
	from, to, page := time.Date(2027, 1, 3, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 4, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 3, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name, sql string
		args      []any
	}{
		{"scoped items", scopedItemsSQL, []any{scope, scope}},
		{"superseding rows", supersedingSQL, []any{scope}},
		{"series members", seriesMembersSQL, []any{[]string{"calcom-series-7", "calcom-series-8"}}},
		{"calendar", calendarSQL, []any{from, to, "", 1000, time.Time{}, "", ""}},
		{"calendar of one resource", calendarSQL, []any{from, to, "host-3", 1000, time.Time{}, "", ""}},
		{"calendar, a later page", calendarSQL, []any{from, to, "", 1000, page, "host-3", "calendly-x"}},
		{"connected claims", connectedClaimsSQL, []any{[]string{"host-4", "host-5"}, []time.Time{from, from}, []time.Time{to, to}, scope}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			growing.Check(t, conn, "filled database", plantest.Statement{SQL: c.sql, Args: c.args}, plantest.Kept)
		})
	}
}

// filledCalendar returns the URL of a database whose calendar tables hold a few thousand analyzed rows.
func filledCalendar(t *testing.T) string {
	t.Helper()
	url := pgtest.NewDatabaseURL(t)
	const n = 5000
	_, err := pgtest.Open(t, url).Exec(context.Background(), fmt.Sprintf(`
INSERT INTO calendar_resources (resource) SELECT 'host-' || i FROM generate_series(1, %[1]d) i;
INSERT INTO calendar_bookings (booking, provider, meeting, resources, during, status, rescheduled_from, findings, payment_refs, series)
SELECT 'b-' || i, 'calendly', 'm-' || i, ARRAY['host-' || (i %% 500)],
       tstzrange('2027-01-01'::timestamptz + i * interval '1 hour', '2027-01-01'::timestamptz + i * interval '1 hour' + interval '30 minutes'),
       'active', CASE WHEN i %% 10 = 0 THEN 'b-' || (i - 1) ELSE '' END,
       CASE WHEN i %% 50 = 0 THEN '[{"event":"00000000-0000-0000-0000-000000000001","type":"scheduled","occurred_at":"2027-01-01T00:00:00Z","code":"late","reason":"x"}]'::jsonb ELSE '[]'::jsonb END,
       ARRAY['pi_' || i], CASE WHEN i %% 4 = 0 THEN 'calcom-series-' || (i / 40) ELSE '' END
FROM generate_series(1, %[1]d) i;
INSERT INTO calendar_booking_refs (ref, booking) SELECT 'pi_' || i, 'b-' || i FROM generate_series(1, %[1]d) i;
INSERT INTO payment_streams (stream, refs) SELECT 'stripe-pi_' || i, ARRAY['pi_' || i] FROM generate_series(1, %[1]d) i;
INSERT INTO payment_stream_refs (ref, stream) SELECT 'pi_' || i, 'stripe-pi_' || i FROM generate_series(1, %[1]d) i;
INSERT INTO calendar_resource_links (resource, name) SELECT 'host-' || i, 'person-' || (i %% 100) FROM generate_series(1, %[1]d) i;
INSERT INTO calendar_slots (booking, resource_id, resource, meeting, during, priority_at, holder)
SELECT 'b-' || i, i %% 500 + 1, 'host-' || (i %% 500), 'm-' || i,
       tstzrange('2027-01-01'::timestamptz + i * interval '1 hour', '2027-01-01'::timestamptz + i * interval '1 hour' + interval '30 minutes'),
       '2026-12-01', i %% 7 <> 0
FROM generate_series(1, %[1]d) i;
INSERT INTO reconciliation_items (kind, subject, booking, other_booking, reason, closed_at, closed_by)
SELECT 'conflict', 'b-' || i || ' b-' || (i + 1), 'b-' || i, 'b-' || (i + 1), 'x',
       CASE WHEN i %% 3 = 0 THEN NULL ELSE now() END, CASE WHEN i %% 3 = 0 THEN NULL ELSE 'auto' END
FROM generate_series(1, %[1]d) i;
ANALYZE calendar_bookings, calendar_slots, reconciliation_items, calendar_resources, calendar_booking_refs, payment_streams,
    payment_stream_refs, calendar_resource_links`, n))
	require.NoError(t, err, "fill the calendar")

	return url
}

// growing are the calendar's tables that grow with it, and the function that reads its claims: no
// statement may read them except through an index condition.
var growing = plantest.Rule{Watched: []string{"calendar_bookings", "calendar_slots", "reconciliation_items", "calendar_booking_refs",
	"payment_stream", "calendar_resource", "bl_overlapping_claims"}}
