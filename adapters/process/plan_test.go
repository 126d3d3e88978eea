package process

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	t1 = time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
	t2 = t1.Add(24 * time.Hour)
)

func active(at time.Time) Booking {
	return Booking{ID: "b", Status: "active", Resources: []string{"host"}, Start: at, End: at.Add(30 * time.Minute)}
}

// apply turns a plan into the stored steps, as the projection would, with every new step in state.
func apply(steps []Step, p Plan, state State) []Step {
	for _, sk := range p.Skip {
		for i := range steps {
			if steps[i].Key == sk.Key && steps[i].State == StatePending {
				steps[i].State = StateSkipped
			}
		}
	}
	for _, k := range p.Revive {
		for i := range steps {
			if steps[i].Key == k {
				steps[i].State = StatePending
			}
		}
	}
	for _, s := range p.Insert {
		s.State = state
		steps = append(steps, s)
	}
	return steps
}

func kinds(p Plan) []Kind {
	var out []Kind
	for _, s := range p.Insert {
		out = append(out, s.Kind)
	}
	return out
}

var both = Targets{Calendar: true, Email: true}

func TestPlanThread(t *testing.T) {
	t.Run("confirmed booking opens both targets; re-planning adds nothing", func(t *testing.T) {
		p := PlanThread("b", active(t1), nil, both)
		assert.Equal(t, []Kind{CalendarCreate, EmailConfirmation}, kinds(p))
		steps := apply(nil, p, StatePending)
		again := PlanThread("b", active(t1), steps, both)
		assert.Empty(t, again.Insert)
		assert.Empty(t, again.Skip)
	})
	t.Run("reschedule after the steps ran is an update with a new key", func(t *testing.T) {
		steps := apply(nil, PlanThread("b", active(t1), nil, both), StateDone)
		p := PlanThread("b", active(t2), steps, both)
		require.Equal(t, []Kind{CalendarUpdate, EmailRescheduled}, kinds(p))
		assert.Equal(t, steps[0].Key, p.Insert[0].After, "the update follows the create")
		assert.NotEqual(t, steps[0].Key, p.Insert[0].Key)
	})
	t.Run("reschedule before the steps ran supersedes them", func(t *testing.T) {
		steps := apply(nil, PlanThread("b", active(t1), nil, both), StatePending)
		p := PlanThread("b", active(t2), steps, both)
		assert.Equal(t, []Kind{CalendarCreate, EmailConfirmation}, kinds(p))
		assert.Len(t, p.Skip, 2)
	})
	t.Run("cancel before the steps ran skips them and sends nothing", func(t *testing.T) {
		steps := apply(nil, PlanThread("b", active(t1), nil, both), StatePending)
		p := PlanThread("b", Booking{ID: "b", Status: "canceled"}, steps, both)
		assert.Empty(t, p.Insert)
		assert.Len(t, p.Skip, 2)
	})
	t.Run("cancel after a confirmation closes both; nothing after that", func(t *testing.T) {
		steps := apply(nil, PlanThread("b", active(t1), nil, both), StateDone)
		p := PlanThread("b", Booking{ID: "b", Status: "canceled"}, steps, both)
		assert.Equal(t, []Kind{CalendarDelete, EmailCancellation}, kinds(p))
		steps = apply(steps, p, StateDone)
		assert.Empty(t, PlanThread("b", active(t2), steps, both).Insert, "canceled is terminal")
	})
	t.Run("cancel while a step is in flight still closes it", func(t *testing.T) {
		steps := apply(nil, PlanThread("b", active(t1), nil, both), StateRequested)
		p := PlanThread("b", Booking{ID: "b", Status: "rejected"}, steps, both)
		assert.Equal(t, []Kind{CalendarDelete, EmailCancellation}, kinds(p))
	})
	t.Run("a booking in conflict gets nothing, and its steps come back when it takes the slot", func(t *testing.T) {
		assert.Empty(t, PlanThread("b", Booking{ID: "b", Status: "conflict", Start: t1, End: t1}, nil, both).Insert)
		steps := apply(nil, PlanThread("b", active(t1), nil, both), StatePending)
		p := PlanThread("b", Booking{ID: "b", Status: "conflict", Resources: []string{"host"}, Start: t1, End: t1.Add(30 * time.Minute)}, steps, both)
		steps = apply(steps, p, StatePending)
		assert.Equal(t, StateSkipped, steps[0].State)
		p = PlanThread("b", active(t1), steps, both)
		assert.Len(t, p.Revive, 2, "skipped steps that never ran are wanted again")
	})
	t.Run("an operator's skip is never revived", func(t *testing.T) {
		steps := apply(nil, PlanThread("b", active(t1), nil, both), StateSkipped)
		steps[0].Attempts, steps[1].Attempts = 1, 1
		p := PlanThread("b", active(t1), steps, both)
		assert.Empty(t, p.Revive)
		assert.Empty(t, p.Insert)
	})
	t.Run("unconfigured targets are not planned", func(t *testing.T) {
		assert.Equal(t, []Kind{EmailConfirmation}, kinds(PlanThread("b", active(t1), nil, Targets{Email: true})))
		assert.Empty(t, PlanThread("b", active(t1), nil, Targets{}).Insert)
	})
	t.Run("keys depend on thread, kind and state only", func(t *testing.T) {
		a := PlanThread("b", active(t1), nil, both)
		b := PlanThread("b", active(t1), nil, both)
		assert.Equal(t, a.Insert[0].Key, b.Insert[0].Key)
		assert.NotEqual(t, a.Insert[0].Key, PlanThread("c", active(t1), nil, both).Insert[0].Key)
	})
}
