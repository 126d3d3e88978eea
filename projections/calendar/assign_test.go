package calendar_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"bookingledger/domain/booking"
	"bookingledger/projections/calendar"
)

// Split in groups of resources, the slot assignment is the one AssignSlots makes of the whole set,
// also when bookings claim several resources (which joins their groups) and meetings are shared.
func TestAssignSlotsInPartsEqualsWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var claims []calendar.Claim
	for i := range 3000 {
		id := booking.ID(fmt.Sprintf("b-%d", i))
		start := base.Add(time.Duration(r.IntN(200)) * 15 * time.Minute)
		end := start.Add(time.Duration(1+r.IntN(4)) * 15 * time.Minute)
		meeting := fmt.Sprintf("m-%d", r.IntN(2500))
		prio := base.Add(-time.Duration(r.IntN(100000)) * time.Second)
		n := 1
		if r.IntN(10) == 0 {
			n = 2 + r.IntN(2)
		}
		for range n {
			claims = append(claims, calendar.Claim{Booking: id, Resource: fmt.Sprintf("host-%d", r.IntN(60)), Meeting: meeting,
				Start: start, End: end, Priority: prio})
		}
	}
	want := calendar.AssignSlots(claims)
	assert.NotEmpty(t, want.Conflicts)
	for _, parts := range []int{1, 2, 3, 8} {
		t.Run(fmt.Sprintf("%d parts", parts), func(t *testing.T) {
			assert.Equal(t, want, calendar.AssignSlotsIn(claims, parts))
		})
	}
}
