package steps

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func seated(seats ...string) Booking {
	b := active(t1)
	b.Seated, b.Seats = true, seats
	return b
}

// written marks the plan's new steps done, as a worker would, recording the attendee state it wrote.
func written(steps []Step, p Plan, b Booking) []Step {
	n := len(steps)
	steps = apply(steps, p, StateDone)
	for i := n; i < len(steps); i++ {
		if steps[i].Kind.IsCalendar() {
			steps[i].Attendees = AttendeeDigest(b.Seats)
		}
	}
	return steps
}

func updates(p Plan) int {
	n := 0
	for _, s := range p.Insert {
		if s.Kind == CalendarUpdate {
			n++
		}
	}
	return n
}

// Each attendee state a seated booking reaches is written once: a seat taken, left and retaken plans
// one update per change, keyed by the state and the step it follows; re-planning finds the keys.
func TestSeatChangesPlanOneAttendeeUpdatePerState(t *testing.T) {
	cal := Targets{Calendar: true}
	b := seated("a")
	p := PlanThread("b", b, nil, cal)
	require.Equal(t, []Kind{CalendarCreate}, kinds(p))
	steps := written(nil, p, b)

	var keys []Key
	for _, seats := range [][]string{{"a", "b"}, {"a", "b", "c"}, {"a", "b"}, {"b", "a", "c"}} {
		b = seated(seats...)
		p = PlanThread("b", b, steps, cal)
		require.Equal(t, 1, updates(p), "%v", seats)
		u := p.Insert[0]
		assert.Equal(t, AttendeeDigest(seats), u.Attendees)
		assert.Equal(t, steps[len(steps)-1].Key, u.After)
		assert.NotContains(t, keys, u.Key, "a state reached again is a new write")
		keys = append(keys, u.Key)
		again := PlanThread("b", b, apply(append([]Step(nil), steps...), p, StatePending), cal)
		assert.Empty(t, again.Insert, "re-planning the same state adds nothing")
		steps = written(steps, p, b)
		assert.Empty(t, PlanThread("b", b, steps, cal).Insert, "written: nothing more")
	}
	assert.Equal(t, AttendeeDigest([]string{"a", "b", "c"}), AttendeeDigest([]string{"c", "a", "b"}), "a set")

	t.Run("a change before the update ran supersedes it; going back revives it", func(t *testing.T) {
		b := seated("a", "b", "c", "d")
		p := PlanThread("b", b, steps, cal)
		pending := apply(append([]Step(nil), steps...), p, StatePending)
		back := PlanThread("b", seated("b", "a", "c"), pending, cal)
		assert.Empty(t, back.Insert)
		require.Len(t, back.Skip, 1)
		assert.Equal(t, p.Insert[0].Key, back.Skip[0].Key)
		skipped := apply(pending, back, StatePending)
		forth := PlanThread("b", b, skipped, cal)
		assert.Equal(t, []Key{p.Insert[0].Key}, forth.Revive)
	})
	t.Run("a booking that is not seated plans no attendee update", func(t *testing.T) {
		b := active(t1)
		steps := written(nil, PlanThread("b", b, nil, cal), b)
		assert.Empty(t, PlanThread("b", b, steps, cal).Insert)
	})
	t.Run("emails follow the booking, not its attendees", func(t *testing.T) {
		b := seated("a")
		steps := written(nil, PlanThread("b", b, nil, both), b)
		p := PlanThread("b", seated("a", "b"), steps, both)
		assert.Equal(t, []Kind{CalendarUpdate}, kinds(p))
	})
	t.Run("an erasure's update is the planner's own for the state its step no longer stands for", func(t *testing.T) {
		last, ok := ListsAttendees(steps)
		require.True(t, ok)
		u := AttendeeUpdate("b", "b", last.Attendees, last)
		cleared := append([]Step(nil), steps...)
		cleared[len(cleared)-1].Attendees = ""
		p := PlanThread("b", seated("a", "b", "c"), cleared, cal)
		require.Len(t, p.Insert, 1)
		assert.Equal(t, u.Key, p.Insert[0].Key)
		deleted := append(append([]Step(nil), steps...), Step{Kind: CalendarDelete, State: StateDone})
		_, ok = ListsAttendees(deleted)
		assert.False(t, ok, "a deleted event lists nobody")
	})
}
