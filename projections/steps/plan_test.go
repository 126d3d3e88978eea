package steps

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

// inserted returns the planned step of kind k.
func inserted(t *testing.T, p Plan, k Kind) Step {
	t.Helper()
	for _, s := range p.Insert {
		if s.Kind == k {
			return s
		}
	}
	require.Failf(t, "step not planned", "%s not among %v", k, kinds(p))
	return Step{}
}

func keyOf(t *testing.T, steps []Step, k Kind) Key {
	t.Helper()
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i].Kind == k {
			return steps[i].Key
		}
	}
	require.Failf(t, "no step", "%s", k)
	return Key{}
}

func TestPlanThreadKeys(t *testing.T) {
	canceled := Booking{ID: "b", Status: "canceled", Resources: []string{"host"}}
	t.Run("every kind has a key of its own", func(t *testing.T) {
		opened := apply(nil, PlanThread("b", active(t1), nil, both), StateDone)
		for _, p := range []Plan{PlanThread("b", active(t1), nil, both), PlanThread("b", active(t2), opened, both), PlanThread("b", canceled, opened, both)} {
			require.Len(t, p.Insert, 2)
			require.NotEqual(t, p.Insert[0].Key, p.Insert[1].Key, "%v share a key: the second would never be inserted", kinds(p))
		}
	})
	t.Run("the key is UUIDv5 over thread, kind and the slot it answers, as earlier versions stored it", func(t *testing.T) {
		create := inserted(t, PlanThread("b", active(t1), nil, both), CalendarCreate)
		require.Equal(t, "active 2030-01-07T09:00:00Z–2030-01-07T09:30:00Z", create.Answers)
		require.Equal(t, "5da91443-945a-59bb-a5d0-b4b329d0e658", create.Key.String())
		require.Equal(t, "aab8d708-2e13-5273-bb7a-2d73c25e1300", StepKey("b", EmailCancellation, "").String())
	})
	t.Run("the same instant in another zone answers the same state", func(t *testing.T) {
		zone := time.FixedZone("UTC+2", 2*60*60)
		in := PlanThread("b", active(t1.In(zone)), nil, both)
		utc := PlanThread("b", active(t1), nil, both)
		require.Len(t, in.Insert, 2)
		for i := range in.Insert {
			require.Equal(t, utc.Insert[i].Answers, in.Insert[i].Answers)
			require.Equal(t, utc.Insert[i].Key, in.Insert[i].Key)
		}
	})
	t.Run("a closing step is one per thread, whatever closed it and whichever booking of the thread", func(t *testing.T) {
		opened := apply(nil, PlanThread("a", active(t1), nil, both), StateDone)
		for _, status := range []string{"canceled", "rejected"} {
			p := PlanThread("a", Booking{ID: "b", Status: status}, opened, both)
			require.Equal(t, StepKey("a", CalendarDelete, ""), inserted(t, p, CalendarDelete).Key, status)
			require.Equal(t, StepKey("a", EmailCancellation, ""), inserted(t, p, EmailCancellation).Key, status)
		}
	})
}

func TestPlanThreadRules(t *testing.T) {
	canceled := Booking{ID: "b", Status: "canceled", Resources: []string{"host"}}
	t.Run("re-planning pending steps revives nothing", func(t *testing.T) {
		steps := apply(nil, PlanThread("b", active(t1), nil, both), StatePending)
		require.Empty(t, PlanThread("b", active(t1), steps, both).Revive)
	})
	t.Run("a step whose outcome is unknown was effected: cancel closes it, a reschedule updates it", func(t *testing.T) {
		steps := apply(nil, PlanThread("b", active(t1), nil, both), StateNeedsReconciliation)
		require.Equal(t, []Kind{CalendarDelete, EmailCancellation}, kinds(PlanThread("b", canceled, steps, both)))
		require.Equal(t, []Kind{CalendarUpdate, EmailRescheduled}, kinds(PlanThread("b", active(t2), steps, both)))
	})
	t.Run("a closing step that failed or was skipped does not finish the thread", func(t *testing.T) {
		for _, st := range []State{StateFailed, StateSkipped} {
			steps := apply(nil, PlanThread("b", active(t1), nil, both), StateDone)
			steps = apply(steps, PlanThread("b", canceled, steps, both), st)
			require.Equal(t, []Kind{CalendarUpdate, EmailRescheduled}, kinds(PlanThread("b", active(t2), steps, both)), st)
		}
	})
	t.Run("back at the first slot after an update ran is another update, after the last one", func(t *testing.T) {
		steps := apply(nil, PlanThread("b", active(t1), nil, both), StateDone)
		steps = apply(steps, PlanThread("b", active(t2), steps, both), StateDone)
		p := PlanThread("b", active(t1), steps, both)
		require.Equal(t, []Kind{CalendarUpdate, EmailRescheduled}, kinds(p))
		require.Equal(t, keyOf(t, steps, CalendarUpdate), inserted(t, p, CalendarUpdate).After)
		require.Equal(t, keyOf(t, steps, EmailRescheduled), inserted(t, p, EmailRescheduled).After)
		require.True(t, t1.Equal(inserted(t, p, CalendarUpdate).Start))
	})
	t.Run("back at the acted-on slot before the update ran skips the update", func(t *testing.T) {
		steps := apply(nil, PlanThread("b", active(t1), nil, both), StateDone)
		steps = apply(steps, PlanThread("b", active(t2), steps, both), StatePending)
		p := PlanThread("b", active(t1), steps, both)
		require.Empty(t, p.Insert)
		require.ElementsMatch(t, []Key{keyOf(t, steps, CalendarUpdate), keyOf(t, steps, EmailRescheduled)}, skipKeys(p))
	})
	t.Run("a new end at the same start is a reschedule", func(t *testing.T) {
		steps := apply(nil, PlanThread("b", active(t1), nil, both), StateDone)
		longer := active(t1)
		longer.End = t1.Add(time.Hour)
		p := PlanThread("b", longer, steps, both)
		require.Equal(t, []Kind{CalendarUpdate, EmailRescheduled}, kinds(p))
		require.True(t, longer.End.Equal(inserted(t, p, CalendarUpdate).End))
	})
	t.Run("closing steps follow the last effected step and name its slot", func(t *testing.T) {
		steps := apply(nil, PlanThread("b", active(t1), nil, both), StateDone)
		steps = apply(steps, PlanThread("b", active(t2), steps, both), StateDone)
		moved := active(t2.Add(time.Hour))
		steps = apply(steps, PlanThread("b", moved, steps, both), StatePending) // never ran
		gone := moved
		gone.Status = "canceled"
		p := PlanThread("b", gone, steps, both)
		for k, after := range map[Kind]Kind{CalendarDelete: CalendarUpdate, EmailCancellation: EmailRescheduled} {
			s := inserted(t, p, k)
			require.Equal(t, keyOf(t, steps[:4], after), s.After, "%s follows the %s that ran", k, after)
			require.True(t, t2.Equal(s.Start), "%s names the slot the invitee was last told", k)
			require.True(t, t2.Add(30*time.Minute).Equal(s.End), k)
		}
	})
	t.Run("the calendar object is on the booking's first resource", func(t *testing.T) {
		b := active(t1)
		b.Resources = []string{"host", "room"}
		require.Equal(t, "host", inserted(t, PlanThread("b", b, nil, both), CalendarCreate).Resource)
	})
	t.Run("without a resource there is no calendar step, and the email still goes", func(t *testing.T) {
		b := active(t1)
		b.Resources = nil
		require.Equal(t, []Kind{EmailConfirmation}, kinds(PlanThread("b", b, nil, both)))
	})
	t.Run("an active row without a slot plans nothing", func(t *testing.T) {
		require.Empty(t, PlanThread("b", Booking{ID: "b", Status: "active", Resources: []string{"host"}}, nil, both).Insert)
	})
	t.Run("a rescheduled thread's steps are the latest booking's", func(t *testing.T) {
		steps := apply(nil, PlanThread("a", Booking{ID: "a", Status: "active", Resources: []string{"host"}, Start: t1, End: t1.Add(30 * time.Minute)}, nil, both), StateDone)
		p := PlanThread("a", active(t2), steps, both)
		for _, s := range p.Insert {
			require.Equal(t, "a", s.Thread)
			require.Equal(t, "b", s.Booking, "the worker checks this booking's calendar row")
		}
	})
}

func skipKeys(p Plan) []Key {
	var out []Key
	for _, s := range p.Skip {
		out = append(out, s.Key)
	}
	return out
}
