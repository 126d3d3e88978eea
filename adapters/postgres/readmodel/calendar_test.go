package readmodel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/projections"
)

func TestConflictHolderRuleAndAutoClose(t *testing.T) {
	e := newEnv(t)
	const host = "https://api.calendly.com/users/HOST1"
	first, second := created("calendly-aaa", at(-48, 0), slot("meeting-1", at(10, 0), 30, host)),
		created("calendly-bbb", at(-47, 0), slot("meeting-2", at(10, 15), 30, host))
	// The later-scheduled booking arrives first: the rule must not depend on arrival.
	e.deliver(t, one("d-2", second))
	e.catchUp(t)
	assert.Equal(t, projections.StatusActive, e.booking(t, "calendly-bbb").Status)
	e.deliver(t, one("d-1", first))
	e.catchUp(t)

	a, b := e.booking(t, "calendly-aaa"), e.booking(t, "calendly-bbb")
	assert.Equal(t, projections.StatusActive, a.Status)
	assert.True(t, a.Holder)
	assert.Equal(t, projections.StatusConflict, b.Status)
	assert.Equal(t, []string{"calendly-aaa"}, e.holders(t))
	items := e.openItems(t)
	require.Len(t, items, 1)
	assert.Equal(t, projections.ItemConflict, items[0].Kind)
	assert.Equal(t, "calendly-bbb calendly-aaa", items[0].Subject)
	assert.Contains(t, items[0].Reason, "earlier provider scheduled-at")

	e.deliver(t, one("d-3", canceled("calendly-aaa", at(-1, 0), "host sick")))
	e.catchUp(t)
	assert.Equal(t, projections.StatusCanceled, e.booking(t, "calendly-aaa").Status)
	b = e.booking(t, "calendly-bbb")
	assert.Equal(t, projections.StatusActive, b.Status)
	assert.True(t, b.Holder)
	assert.Empty(t, e.openItems(t))
	all, err := e.rm.Items(context.Background(), "calendly-bbb")
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Equal(t, projections.ClosedByAuto, all[0].ClosedBy)
	assert.Contains(t, all[0].Note, "holder calendly-aaa is canceled now (host sick); calendly-bbb holds the slot")
}
