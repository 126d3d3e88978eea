package readmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/pgtest"
)

// TestScopedQueriesStayIndexed guards the cost of the queries that run per incremental batch and per
// calendar request: it must follow the batch (or the window), not the size of the calendar. pgx
// prepares statements and PostgreSQL switches to a generic plan after a few executions, and a generic
// plan cannot use an index behind "$1 OR …" or a partial index whose predicate only the parameter
// values imply. With plan_cache_mode = force_generic_plan over a calendar of a few thousand rows, no
// plan may read calendar_bookings, calendar_slots or reconciliation_items except through an index
// condition (a whole-table or whole-index walk fails the test).
func TestScopedQueriesStayIndexed(t *testing.T) {
	pool := pgtest.NewDatabase(t)
	ctx := context.Background()
	conn := fillCalendar(t, pool)

	scope := `'{b-7,b-8,b-9}'`
	cases := []struct {
		name, sql, args string
	}{
		{"scoped items", scopedItemsSQL, scope + `, ` + scope},
		{"superseding rows", supersedingSQL, scope},
		{"calendar", calendarSQL, `'2027-01-03T00:00:00Z', '2027-01-04T00:00:00Z', '', 1000, '0001-01-01T00:00:00Z', '', ''`},
		{"calendar of one resource", calendarSQL, `'2027-01-03T00:00:00Z', '2027-01-04T00:00:00Z', 'host-3', 1000, '0001-01-01T00:00:00Z', '', ''`},
		{"calendar, a later page", calendarSQL, `'2027-01-03T00:00:00Z', '2027-01-04T00:00:00Z', '', 1000, '2027-01-03T12:00:00Z', 'host-3', 'calendly-x'`},
		{"connected claims", connectedClaimsSQL, `'{host-4,host-5}', '{2027-01-03T00:00:00Z,2027-01-03T00:00:00Z}', '{2027-01-04T00:00:00Z,2027-01-04T00:00:00Z}', ` + scope},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad, raw, err := unindexedPlan(ctx, conn, fmt.Sprintf("plan_probe_%d", i), c.sql, c.args)
			require.NoError(t, err)
			for _, b := range bad {
				assert.Failf(t, "generic plan reads a table without an index condition", "%s\nplan: %s", b, raw)
			}
		})
	}
}

// fillCalendar fills the calendar's tables with a few thousand rows, analyzes them, and returns a
// connection that plans every statement generically.
func fillCalendar(t *testing.T, pool *pgxpool.Pool) *pgxpool.Conn {
	t.Helper()
	ctx := context.Background()
	const n = 5000
	_, err := pool.Exec(ctx, fmt.Sprintf(`
INSERT INTO calendar_resources (resource) SELECT 'host-' || i FROM generate_series(1, %[1]d) i;
INSERT INTO calendar_bookings (booking, provider, meeting, resources, during, status, rescheduled_from, findings, payment_refs)
SELECT 'b-' || i, 'calendly', 'm-' || i, ARRAY['host-' || (i %% 500)],
       tstzrange('2027-01-01'::timestamptz + i * interval '1 hour', '2027-01-01'::timestamptz + i * interval '1 hour' + interval '30 minutes'),
       'active', CASE WHEN i %% 10 = 0 THEN 'b-' || (i - 1) ELSE '' END,
       CASE WHEN i %% 50 = 0 THEN '[{"event":"00000000-0000-0000-0000-000000000001","type":"scheduled","occurred_at":"2027-01-01T00:00:00Z","code":"late","reason":"x"}]'::jsonb ELSE '[]'::jsonb END,
       ARRAY['pi_' || i]
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

	return planningConn(t, pool)
}

// planningConn returns a connection of pool that plans as a batch's transaction does.
func planningConn(t *testing.T, pool *pgxpool.Pool) *pgxpool.Conn {
	t.Helper()
	conn, err := pool.Acquire(context.Background())
	require.NoError(t, err)
	t.Cleanup(conn.Release)
	for _, setting := range batchPlanning {
		_, err = conn.Exec(context.Background(), `SET `+setting)
		require.NoError(t, err)
	}
	return conn
}

// unindexedPlan prepares sql as name and lists the scans without an index condition in its generic
// plan, with the plan. args are the parameters as SQL literals; empty, every parameter is NULL (a
// generic plan does not depend on them).
func unindexedPlan(ctx context.Context, conn *pgxpool.Conn, name, sql, args string) ([]string, []byte, error) {
	if _, err := conn.Exec(ctx, `PREPARE `+name+` AS `+sql); err != nil {
		return nil, nil, fmt.Errorf("prepare %s: %w", sql, err)
	}
	if args == "" {
		var n int
		if err := conn.QueryRow(ctx, `SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = $1`, name).Scan(&n); err != nil {
			return nil, nil, err
		}
		args = strings.TrimSuffix(strings.Repeat("NULL, ", n), ", ")
	}
	explain := `EXPLAIN (FORMAT JSON) EXECUTE ` + name
	if args != "" {
		explain += `(` + args + `)`
	}
	var plan []struct {
		Plan planNode `json:"Plan"`
	}
	var raw []byte
	if err := conn.QueryRow(ctx, explain).Scan(&raw); err != nil {
		return nil, nil, fmt.Errorf("explain %s: %w", sql, err)
	}
	if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
		return nil, raw, fmt.Errorf("explain %s: %d plans, %v", sql, len(plan), err)
	}
	return plan[0].Plan.unindexed(), raw, nil
}

// planNode is the part of EXPLAIN (FORMAT JSON) the test reads.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	IndexName    string     `json:"Index Name"`
	IndexCond    string     `json:"Index Cond"`
	Filter       string     `json:"Filter"`
	Plans        []planNode `json:"Plans"`
}

// unindexed lists the scans of the calendar's growing tables that have no index condition: sequential
// scans, and index scans that walk a whole index. (A bitmap heap scan is as selective as the bitmap
// index scans under it, which are checked themselves.)
func (p planNode) unindexed() []string {
	var out []string
	growing := func(name string) bool {
		for _, table := range []string{"calendar_bookings", "calendar_slots", "reconciliation_items", "calendar_booking_refs",
			"payment_stream", "calendar_resource"} {
			if strings.HasPrefix(name, table) {
				return true
			}
		}
		return false
	}
	switch p.NodeType {
	case "Seq Scan":
		if growing(p.RelationName) {
			out = append(out, "Seq Scan on "+p.RelationName)
		}
	case "Index Scan", "Index Only Scan", "Bitmap Index Scan":
		if growing(p.IndexName) && p.IndexCond == "" {
			out = append(out, p.NodeType+" without a condition on "+p.IndexName)
		}
		// The claims' start index answers an overlap within its look-back only: by resource alone it
		// reads every claim of the resource and filters them.
		if p.IndexName == "calendar_slots_start_idx" && strings.Contains(p.Filter, "&&") && !strings.Contains(p.IndexCond, "lower(during) >=") {
			out = append(out, p.NodeType+" of "+p.IndexName+" filtering overlaps without a bounded start: "+p.IndexCond)
		}
	}
	for _, c := range p.Plans {
		out = append(out, c.unindexed()...)
	}
	return out
}
