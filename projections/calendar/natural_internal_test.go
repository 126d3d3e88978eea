package calendar

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNaturalOrderOfBookingIDs(t *testing.T) {
	ids := []string{"demo-10", "demo-9", "demo-1", "demo-a", "demo-09", "demo-", "calendly-2", "demo-100", "demo-10b", "demo-10a"}
	slices.SortFunc(ids, naturalCompare)
	assert.Equal(t, []string{"calendly-2", "demo-", "demo-1", "demo-09", "demo-9", "demo-10", "demo-10a", "demo-10b", "demo-100", "demo-a"}, ids)
	for _, a := range ids {
		for _, b := range ids {
			assert.Equal(t, -naturalCompare(b, a), naturalCompare(a, b), "%s %s antisymmetric", a, b)
			if a != b {
				assert.NotZero(t, naturalCompare(a, b), "%s %s total", a, b)
			}
		}
	}
}
