package readmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

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
	const n = 5000
	_, err := pool.Exec(ctx, fmt.Sprintf(`
INSERT INTO calendar_resources (resource) SELECT 'host-' || i FROM generate_series(1, %[1]d) i;
INSERT INTO calendar_bookings (booking, provider, meeting, resources, during, status, rescheduled_from, findings)
SELECT 'b-' || i, 'calendly', 'm-' || i, ARRAY['host-' || (i %% 500)],
       tstzrange('2027-01-01'::timestamptz + i * interval '1 hour', '2027-01-01'::timestamptz + i * interval '1 hour' + interval '30 minutes'),
       'active', CASE WHEN i %% 10 = 0 THEN 'b-' || (i - 1) ELSE '' END,
       CASE WHEN i %% 50 = 0 THEN '[{"event":"00000000-0000-0000-0000-000000000001","type":"scheduled","occurred_at":"2027-01-01T00:00:00Z","code":"late","reason":"x"}]'::jsonb ELSE '[]'::jsonb END
FROM generate_series(1, %[1]d) i;
INSERT INTO calendar_slots (booking, resource_id, resource, meeting, during, priority_at, holder)
SELECT 'b-' || i, i %% 500 + 1, 'host-' || (i %% 500), 'm-' || i,
       tstzrange('2027-01-01'::timestamptz + i * interval '1 hour', '2027-01-01'::timestamptz + i * interval '1 hour' + interval '30 minutes'),
       '2026-12-01', i %% 7 <> 0
FROM generate_series(1, %[1]d) i;
INSERT INTO reconciliation_items (kind, subject, booking, other_booking, reason, closed_at, closed_by)
SELECT 'conflict', 'b-' || i || ' b-' || (i + 1), 'b-' || i, 'b-' || (i + 1), 'x',
       CASE WHEN i %% 3 = 0 THEN NULL ELSE now() END, CASE WHEN i %% 3 = 0 THEN NULL ELSE 'auto' END
FROM generate_series(1, %[1]d) i;
ANALYZE calendar_bookings, calendar_slots, reconciliation_items, calendar_resources`, n))
	require.NoError(t, err, "fill the calendar")

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`)
	require.NoError(t, err)

	scope := `'{b-7,b-8,b-9}'`
	cases := []struct {
		name, sql, args string
	}{
		{"scoped items", scopedItemsSQL, scope + `, ` + scope},
		{"superseding rows", supersedingSQL, scope},
		{"calendar", calendarSQL, `'2027-01-03T00:00:00Z', '2027-01-04T00:00:00Z', '', 1000, '0001-01-01T00:00:00Z', '', ''`},
		{"calendar of one resource", calendarSQL, `'2027-01-03T00:00:00Z', '2027-01-04T00:00:00Z', 'host-3', 1000, '0001-01-01T00:00:00Z', '', ''`},
		{"calendar, a later page", calendarSQL, `'2027-01-03T00:00:00Z', '2027-01-04T00:00:00Z', '', 1000, '2027-01-03T12:00:00Z', 'host-3', 'calendly-x'`},
		{"connected claims", connectedClaimsSQL, `'{4,5}', '{2027-01-03T00:00:00Z,2027-01-03T00:00:00Z}', '{2027-01-04T00:00:00Z,2027-01-04T00:00:00Z}'`},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("plan_probe_%d", i)
			_, err := conn.Exec(ctx, `PREPARE `+name+` AS `+c.sql)
			require.NoError(t, err, "prepare")
			var plan []struct {
				Plan planNode `json:"Plan"`
			}
			var raw []byte
			require.NoError(t, conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE `+name+`(`+c.args+`)`).Scan(&raw))
			require.NoError(t, json.Unmarshal(raw, &plan))
			require.Len(t, plan, 1)
			for _, bad := range plan[0].Plan.unindexed() {
				assert.Failf(t, "generic plan reads a table without an index condition", "%s\nplan: %s", bad, raw)
			}
		})
	}
}

// planNode is the part of EXPLAIN (FORMAT JSON) the test reads.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	IndexName    string     `json:"Index Name"`
	IndexCond    string     `json:"Index Cond"`
	Plans        []planNode `json:"Plans"`
}

// unindexed lists the scans of the calendar's growing tables that have no index condition: sequential
// scans, and index scans that walk a whole index. (A bitmap heap scan is as selective as the bitmap
// index scans under it, which are checked themselves.)
func (p planNode) unindexed() []string {
	var out []string
	growing := func(name string) bool {
		for _, table := range []string{"calendar_bookings", "calendar_slots", "reconciliation_items"} {
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
	}
	for _, c := range p.Plans {
		out = append(out, c.unindexed()...)
	}
	return out
}
