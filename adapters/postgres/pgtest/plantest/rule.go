package plantest

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Rule finds the scans of a plan whose cost follows the size of a watched table rather than the
// statement's keys.
type Rule struct {
	// Watched names the tables (their indexes are named after them) and the SQL functions the
	// statements must read through an index condition, each by a part of its name.
	Watched []string
}

// Check explains s on conn in each of modes and fails t for every scan the rule finds, saying where
// (the database, the settings), the statement, its arguments and the plan. Every plan is logged.
func (r Rule) Check(t *testing.T, conn *pgx.Conn, where string, s Statement, modes ...Mode) {
	t.Helper()
	leading, partial := indexKeys(t, conn)
	for _, mode := range modes {
		plan, err := Explain(context.Background(), conn, mode, s)
		if !assert.NoError(t, err, "%s, %s plan of\n%s\nargs: %s", where, mode, s.SQL, s.ArgsText()) {
			continue
		}
		t.Logf("%s, %s plan of\n%s\nargs: %s\n%s", where, mode, s.SQL, s.ArgsText(), plan)
		for _, scan := range r.unindexed(plan.Root, leading, partial) {
			assert.Failf(t, "plan reads a table without an index condition", "%s, %s plan: %s\nin: %s\nargs: %s\nplan:\n%s",
				where, mode, scan, s.SQL, s.ArgsText(), plan)
		}
	}
}

// unindexed lists the scans of watched names without an index condition: sequential scans, index
// scans that walk a whole index (no condition or, on a B-tree, none on its leading key:
// calendar_slots_pkey (booking, resource_id) scanned by resource_id alone), and calls of a watched
// SQL function PostgreSQL did not inline (its scans would be out of sight). A bitmap heap scan is as
// selective as the bitmap index scans under it, which are checked themselves. leading maps B-tree
// indexes to their first key. A partial index is exempt from both conditions: it holds only the rows
// its predicate admits (process_steps_open_idx: the steps not finished), so walking it whole costs
// what those rows are, not the table.
func (r Rule) unindexed(n Node, leading map[string]string, partial map[string]bool) []string {
	var out []string
	switch n.NodeType {
	case "Seq Scan":
		if r.watches(n.RelationName) {
			out = append(out, "Seq Scan on "+n.RelationName)
		}
	case "Function Scan":
		if r.watches(n.FunctionName) {
			out = append(out, "Function Scan of "+n.FunctionName+" (not inlined)")
		}
	case "Index Scan", "Index Only Scan", "Bitmap Index Scan":
		if !r.watches(n.IndexName) || partial[n.IndexName] {
			break
		}
		key, btree := leading[n.IndexName]
		switch {
		case n.IndexCond == "":
			out = append(out, n.NodeType+" without a condition on "+n.IndexName)
		case btree && !mentions(n.IndexCond, key):
			out = append(out, n.NodeType+" of "+n.IndexName+" without a condition on its leading key "+key+": "+n.IndexCond)
		}
		// The claims' start index answers an overlap within its look-back only: by resource alone it
		// reads every claim of the resource and filters them.
		if n.IndexName == "calendar_slots_start_idx" && strings.Contains(n.Filter, "&&") && !strings.Contains(n.IndexCond, "lower(during) >=") {
			out = append(out, n.NodeType+" of "+n.IndexName+" filtering overlaps without a bounded start: "+n.IndexCond)
		}
	}
	for _, c := range n.Plans {
		out = append(out, r.unindexed(c, leading, partial)...)
	}
	return out
}

func (r Rule) watches(name string) bool {
	return slices.ContainsFunc(r.Watched, func(w string) bool { return strings.Contains(name, w) })
}

// mentions reports whether an index condition names key as a column of the scanned table (not as an
// outer one's, b.booking).
func mentions(cond, key string) bool {
	return regexp.MustCompile(`(^|[^.\w])` + regexp.QuoteMeta(key)).MatchString(cond)
}

// indexKeys returns the first key column (or expression) of every B-tree index of conn's schema, by
// index name, and which of the schema's indexes are partial.
func indexKeys(t *testing.T, conn *pgx.Conn) (leading map[string]string, partial map[string]bool) {
	t.Helper()
	leading, partial = map[string]string{}, map[string]bool{}
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT
    coalesce(jsonb_object_agg(c.relname, pg_get_indexdef(c.oid, 1, true)) FILTER (WHERE am.amname = 'btree'), '{}'),
    coalesce(jsonb_object_agg(c.relname, true) FILTER (WHERE i.indpred IS NOT NULL), '{}')
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
WHERE c.relnamespace = current_schema()::regnamespace`).Scan(&leading, &partial))
	return leading, partial
}
