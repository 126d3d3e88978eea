package plantest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRuleFindsWholeWalks(t *testing.T) {
	r := Rule{Watched: []string{"calendar_slots", "bl_overlapping_claims"}}
	leading := map[string]string{"calendar_slots_pkey": "booking", "calendar_slots_start_idx": "resource_id", "calendar_slots_open_idx": "state"}
	partial := map[string]bool{"calendar_slots_open_idx": true}
	scan := func(index, cond, filter string) Node {
		return Node{NodeType: "Index Scan", IndexName: index, IndexCond: cond, Filter: filter}
	}
	for _, c := range []struct {
		name string
		plan Node
		want []string
	}{
		{"by key", scan("calendar_slots_pkey", "(booking = ANY ($1))", ""), nil},
		{"an unwatched table", Node{NodeType: "Seq Scan", RelationName: "projection_checkpoints"}, nil},
		{"under a join", Node{NodeType: "Nested Loop", Plans: []Node{{NodeType: "Seq Scan", RelationName: "calendar_slots"}}}, []string{"Seq Scan on calendar_slots"}},
		{"no condition", scan("calendar_slots_pkey", "", ""), []string{"Index Scan without a condition on calendar_slots_pkey"}},
		{"not the leading key", scan("calendar_slots_pkey", "(resource_id = $1)", ""),
			[]string{"Index Scan of calendar_slots_pkey without a condition on its leading key booking: (resource_id = $1)"}},
		{"an outer table's leading key", scan("calendar_slots_pkey", "(resource_id = b.booking)", ""),
			[]string{"Index Scan of calendar_slots_pkey without a condition on its leading key booking: (resource_id = b.booking)"}},
		{"an unbounded overlap", scan("calendar_slots_start_idx", "(resource_id = $1)", "(during && $2)"),
			[]string{"Index Scan of calendar_slots_start_idx filtering overlaps without a bounded start: (resource_id = $1)"}},
		{"a bounded overlap", scan("calendar_slots_start_idx", "((resource_id = $1) AND (lower(during) >= lower($2)))", "(during && $2)"), nil},
		{"a partial index whole", scan("calendar_slots_open_idx", "", ""), nil},
		{"a partial index by another key", scan("calendar_slots_open_idx", "(resource_id = $1)", ""), nil},
		{"not inlined", Node{NodeType: "Function Scan", FunctionName: "bl_overlapping_claims"}, []string{"Function Scan of bl_overlapping_claims (not inlined)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, r.unindexed(c.plan, leading, partial))
		})
	}
}

func TestTraceKeepsWhatCanBePlanned(t *testing.T) {
	tr := &Trace{Naming: []string{"calendar_slots"}, Max: 2}
	const sql = "SELECT 1 FROM calendar_slots WHERE booking = $1"
	tr.add(sql, []any{"a"}) // On is not set yet
	tr.On.Store(true)
	for _, b := range []string{"b", "c", "d"} {
		tr.add(sql, []any{b})
	}
	for _, other := range []string{"BEGIN; SET LOCAL enable_seqscan = off; SET LOCAL jit = off", "SELECT 1 FROM calendar_slots; SELECT 2",
		"SELECT 1 FROM projection_checkpoints", "commit"} {
		tr.add(other, nil)
	}
	assert.Equal(t, []Statement{{sql, []any{"b"}}, {sql, []any{"c"}}}, tr.Statements())
	assert.Equal(t, []string{"enable_seqscan = off", "jit = off"}, tr.Settings())
}
