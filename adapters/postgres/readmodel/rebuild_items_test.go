package readmodel_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/privacy"
	"bookingledger/domain/booking"
	"bookingledger/projections"
)

// A rebuild syncs the reconciliation queue as the incremental path does: two databases get the same
// history, one catches up on the last changes incrementally and the other rebuilds, and their queues
// must match item for item. The queue is given every kind of work: items the rebuilt calendar no
// longer calls for (a holder canceled since the last sync), items whose reason changed (a holder
// moved), causes that are new (a conflict never projected, on two resources), causes an operator
// already closed (a conflict and a late event), group meetings and late events. The rebuild computes
// the calendar in one chunk, or in chunks as small as the connected sets allow, where a holder that
// moved away (leaving-holder) leaves its former conflict to be closed across two chunks.
func TestRebuildSyncsItemsAsIncremental(t *testing.T) {
	for _, chunk := range []int{0, 1} {
		t.Run(fmt.Sprintf("chunk=%d", chunk), func(t *testing.T) { testRebuildSyncsItems(t, chunk) })
	}
}

func testRebuildSyncsItems(t *testing.T, chunk int) {
	ctx := context.Background()
	const hostA, hostB = "https://api.calendly.com/users/HOST-Z", "https://api.calendly.com/users/HOST-Y"
	const hostC, hostD = "host-c", "host-d"
	prepare := func(e *env) (conflict, late projections.Item) {
		for _, seed := range []uint64{1, 2, 3} {
			for _, d := range genScenario(seed) {
				e.deliver(t, d)
			}
		}
		e.deliver(t, one("gone-holder", created("calendly-gone-holder", at(-50, 0), slot("m-gone", at(15, 0), 60, hostC))))
		e.deliver(t, one("gone-loser", created("calendly-gone-loser", at(-49, 0), slot("m-gone-2", at(15, 30), 60, hostC))))
		e.deliver(t, one("moving-holder", created("acuity-moving-holder", at(-50, 0), slot("acuity-moving-holder", at(16, 0), 60, hostD))))
		e.deliver(t, one("moving-loser", created("calendly-moving-loser", at(-49, 0), slot("m-moving", at(16, 0), 60, hostD))))
		e.deliver(t, one("leaving-holder", created("acuity-leaving-holder", at(-50, 0), slot("acuity-leaving-holder", at(19, 0), 60, hostD))))
		e.deliver(t, one("leaving-loser", created("calendly-leaving-loser", at(-49, 0), slot("m-leaving", at(19, 0), 60, hostD))))
		e.catchUp(t)

		open := e.openItems(t)
		sort.Slice(open, func(i, j int) bool { return open[i].Subject < open[j].Subject })
		for _, it := range open {
			switch {
			case it.Kind == projections.ItemConflict && conflict.ID == 0 && !strings.HasPrefix(it.Subject, "calendly-gone-loser") && !strings.HasPrefix(it.Subject, "calendly-moving-loser") && !strings.HasPrefix(it.Subject, "calendly-leaving-loser"):
				conflict = it
			case it.Kind == projections.ItemLateEvent && late.ID == 0:
				late = it
			}
		}
		require.NotZero(t, conflict.ID, "the scenarios open a conflict")
		require.NotZero(t, late.ID, "the scenarios open a late event")
		for _, it := range []projections.Item{conflict, late} {
			_, err := e.rm.Resolve(ctx, it.ID, "handled by the host", "tester")
			require.NoError(t, err)
		}

		// Changes the queue has not seen when the rebuild starts.
		e.deliver(t, one("gone-holder-cancel", canceled("calendly-gone-holder", at(-2, 0), "host sick")))
		e.deliver(t, one("moving-holder-move", event("acuity-moving-holder", "rescheduled", at(-2, 0),
			booking.Rescheduled{Slot: slot("acuity-moving-holder", at(16, 30), 60, hostD)})))
		e.deliver(t, one("leaving-holder-move", event("acuity-leaving-holder", "rescheduled", at(-2, 0),
			booking.Rescheduled{Slot: slot("acuity-leaving-holder", at(21, 0), 60, hostD)})))
		e.deliver(t, one("two-first", created("calendly-two-first", at(-30, 0), slot("m-two-1", at(17, 0), 60, hostA, hostB))))
		e.deliver(t, one("two-second", created("calendly-two-second", at(-29, 0), slot("m-two-2", at(17, 30), 60, hostB, hostA))))
		return conflict, late
	}
	queue := func(e *env) []string {
		rows, err := e.pool.Query(ctx, `SELECT concat_ws('|', kind, subject, closed_at IS NULL, coalesce(closed_by, ''), reason, note)
FROM reconciliation_items ORDER BY kind, subject, id`)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}

	// Items closed automatically while the history was prepared depend on how the log's arrival was
	// batched (a transient conflict); they are history, not what either path computes at the end.
	settled := func(e *env, before []string) []string {
		var out []string
		for _, s := range queue(e) {
			if !(strings.Contains(s, "|f|auto|") && slices.Contains(before, s)) {
				out = append(out, s)
			}
		}
		return out
	}
	inc, reb := newEnv(t), newEnv(t)
	prepare(inc)
	conflict, late := prepare(reb)
	incBefore, before := queue(inc), queue(reb)
	inc.catchUp(t)
	// The last deliveries may still be held back from the log by another test's transaction
	// (ReadAll returns only transactions older than every running one, cluster-wide): the rebuild
	// must start with them readable, or it ends before them.
	reb.waitReadable(t)
	reb.rm = readmodel.New(reb.pool, reb.store, eventcodec.JSON{}, readmodel.Options{Links: eventcodec.JSON{}, Texts: privacy.NewTexts(reb.pool), RebuildChunk: chunk})
	require.NoError(t, reb.rm.Rebuild(ctx, nil))
	after := settled(reb, before)
	assert.Equal(t, settled(inc, incBefore), after)

	var two string
	for _, s := range after {
		if strings.HasPrefix(s, "conflict|calendly-two-second calendly-two-first|t|") {
			two = s
		}
	}
	assert.Contains(t, two, " on "+hostB+", "+hostA+": calendly-two-first holds the slot", "a new conflict on two resources, in collation order")
	var moved, closed, left bool
	for _, s := range after {
		left = left || strings.HasPrefix(s, "conflict|calendly-leaving-loser acuity-leaving-holder|f|auto|") && strings.Contains(s, "holds the slot now")
		moved = moved || strings.HasPrefix(s, "conflict|calendly-moving-loser acuity-moving-holder|t|") && !slices.Contains(before, s)
		// The cancel's reason is a person's free text, kept apart from the events (ADR 0015): no note names it.
		closed = closed || strings.HasPrefix(s, "conflict|calendly-gone-loser calendly-gone-holder|f|auto|") && !strings.Contains(s, "host sick")
	}
	assert.True(t, moved, "the moved holder changes a reason")
	assert.True(t, closed, "the canceled holder closes an item")
	assert.True(t, left, "the holder that moved away closes an item")
	for _, subject := range []string{conflict.Subject, late.Subject} {
		for _, s := range after {
			if strings.Contains(s, "|"+subject+"|") {
				assert.Contains(t, s, "|f|operator|", "an operator's decision is reopened")
			}
		}
	}

	cp, err := reb.rm.Checkpoint(ctx)
	require.NoError(t, err)
	assert.False(t, cp.Rebuilding, "the final write ends the rebuild")
}
