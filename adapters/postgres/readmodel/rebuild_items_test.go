package readmodel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/domain/booking"
	"bookingledger/projections"
)

// A rebuild plans its reconciliation sync from memory; the plan must be the one the SQL of the
// incremental path makes from the rows written. The queue is given every kind of work: items the
// rebuilt calendar no longer calls for (a holder canceled since the last sync), items whose reason
// changed (a holder moved), causes that are new (a conflict never projected, on two resources),
// causes an operator already closed (a conflict and a late event), group meetings and late events.
func TestRebuildItemPlanEqualsSQLPlan(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, seed := range []uint64{1, 2, 3} {
		for _, d := range genScenario(seed) {
			e.deliver(t, d)
		}
	}
	const hostA, hostB = "https://api.calendly.com/users/HOST-Z", "https://api.calendly.com/users/HOST-Y"
	const hostC, hostD = "host-c", "host-d"
	e.deliver(t, one("gone-holder", created("calendly-gone-holder", at(-50, 0), slot("m-gone", at(15, 0), 60, hostC))))
	e.deliver(t, one("gone-loser", created("calendly-gone-loser", at(-49, 0), slot("m-gone-2", at(15, 30), 60, hostC))))
	e.deliver(t, one("moving-holder", created("acuity-moving-holder", at(-50, 0), slot("acuity-moving-holder", at(16, 0), 60, hostD))))
	e.deliver(t, one("moving-loser", created("calendly-moving-loser", at(-49, 0), slot("m-moving", at(16, 0), 60, hostD))))
	e.catchUp(t)

	open := e.openItems(t)
	var conflict, late *projections.Item
	for i, it := range open {
		switch {
		case it.Kind == projections.ItemConflict && conflict == nil && it.Booking != "calendly-gone-loser" && it.Booking != "calendly-moving-loser":
			conflict = &open[i]
		case it.Kind == projections.ItemLateEvent && late == nil:
			late = &open[i]
		}
	}
	require.NotNil(t, conflict, "the scenarios open a conflict")
	require.NotNil(t, late, "the scenarios open a late event")
	for _, it := range []*projections.Item{conflict, late} {
		_, err := e.rm.Resolve(ctx, it.ID, "handled by the host", "tester")
		require.NoError(t, err)
	}

	// Changes the queue has not seen when the rebuild starts.
	e.deliver(t, one("gone-holder-cancel", canceled("calendly-gone-holder", at(-2, 0), "host sick")))
	e.deliver(t, one("moving-holder-move", event("acuity-moving-holder", "rescheduled", at(-2, 0),
		booking.Rescheduled{Slot: slot("acuity-moving-holder", at(16, 30), 60, hostD)})))
	e.deliver(t, one("two-first", created("calendly-two-first", at(-30, 0), slot("m-two-1", at(17, 0), 60, hostA, hostB))))
	e.deliver(t, one("two-second", created("calendly-two-second", at(-29, 0), slot("m-two-2", at(17, 30), 60, hostB, hostA))))
	e.waitReadable(t)

	var mem, sql readmodel.ItemPlan
	calls := 0
	rm := readmodel.New(e.pool, e.store, eventcodec.JSON{}, readmodel.Options{})
	readmodel.SetCompareItemPlans(rm, func(m, s readmodel.ItemPlan) { mem, sql, calls = m, s, calls+1 })
	require.NoError(t, rm.Rebuild(ctx, nil))

	require.Equal(t, 1, calls, "one final write plans the items")
	assert.Equal(t, sql, mem)
	var two string
	for _, s := range mem.Insert {
		if strings.HasPrefix(s, "conflict|calendly-two-second calendly-two-first|") {
			two = s
		}
	}
	assert.Contains(t, two, " on "+hostB+", "+hostA+": calendly-two-first holds the slot", "a new conflict on two resources, in collation order")
	assert.NotEmpty(t, mem.Refresh, "the moved holder changes a reason")
	assert.NotEmpty(t, mem.Close, "the canceled holder closes an item")
	for _, s := range mem.Insert {
		assert.NotContains(t, s, conflict.Subject, "an operator's decision is reopened")
		assert.NotContains(t, s, late.Subject, "an operator's decision is reopened")
	}

	cp, err := rm.Checkpoint(ctx)
	require.NoError(t, err)
	assert.False(t, cp.Rebuilding, "the final write ends the rebuild")
}
