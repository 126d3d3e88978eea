package resource_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/resource"
)

const (
	calendly = "https://api.calendly.com/users/DRSMITH"
	acuity   = "acuity-calendar-77"
	calcom   = "calcom-user-12"
)

func apply(s *resource.State, cs ...resource.Change) {
	for _, c := range cs {
		s.Evolve(resource.Event{Type: c.Type, Name: c.Name, Resources: c.Resources, At: time.Unix(0, 0)})
	}
}

func TestLinkDecidesOnlyWhatIsNew(t *testing.T) {
	s := resource.Fold(nil)
	c, err := resource.Link(s, "dr-smith", []string{acuity, calendly, acuity})
	require.NoError(t, err)
	require.NotNil(t, c)
	assert.Equal(t, resource.Change{Type: resource.TypeLinked, Name: "dr-smith", Resources: []string{acuity, calendly}}, *c)
	apply(&s, *c)
	assert.Equal(t, "dr-smith", s.Canonical(calendly))
	assert.Equal(t, calcom, s.Canonical(calcom), "an unlinked resource is its own")

	again, err := resource.Link(s, "dr-smith", []string{calendly})
	require.NoError(t, err)
	assert.Nil(t, again, "linking what is linked appends nothing")

	c, err = resource.Link(s, "dr-smith", []string{calendly, calcom})
	require.NoError(t, err)
	assert.Equal(t, []string{calcom}, c.Resources)
}

func TestLinkRefusals(t *testing.T) {
	s := resource.Fold(nil)
	c, err := resource.Link(s, "dr-smith", []string{calendly})
	require.NoError(t, err)
	apply(&s, *c)
	for _, tc := range []struct {
		name string
		ids  []string
		want error
		msg  string
	}{
		{"dr-jones", []string{calendly}, resource.ErrLinkedElsewhere, "is linked to dr-smith"},
		{calendly, []string{acuity}, resource.ErrInvalid, "only letters"},
		{"dr-jones", []string{"dr-smith"}, resource.ErrLinkedElsewhere, "name of another linked resource"},
		{"dr-jones", nil, resource.ErrInvalid, "which provider resources"},
		{"dr-jones", []string{"has space"}, resource.ErrInvalid, "without white space"},
		{"", []string{acuity}, resource.ErrInvalid, "1 to 100 bytes"},
	} {
		_, err := resource.Link(s, tc.name, tc.ids)
		assert.ErrorIs(t, err, tc.want, "%s %v", tc.name, tc.ids)
		assert.ErrorContains(t, err, tc.msg)
	}
}

func TestUnlink(t *testing.T) {
	s := resource.Fold(nil)
	c, _ := resource.Link(s, "dr-smith", []string{calendly, acuity})
	apply(&s, *c)
	_, err := resource.Unlink(s, "dr-jones", nil)
	assert.ErrorIs(t, err, resource.ErrNotFound)
	_, err = resource.Unlink(s, "dr-smith", []string{calcom})
	assert.ErrorIs(t, err, resource.ErrInvalid)
	c, err = resource.Unlink(s, "dr-smith", []string{acuity})
	require.NoError(t, err)
	apply(&s, *c)
	assert.Equal(t, []string{calendly}, s.Resources("dr-smith"))
	c, err = resource.Unlink(s, "dr-smith", nil)
	require.NoError(t, err)
	apply(&s, *c)
	assert.Empty(t, s.Names())
}

func TestPlanIsIdempotentAndMovesIdentifiers(t *testing.T) {
	s := resource.Fold(nil)
	desired := map[string][]string{"dr-smith": {calendly, acuity}, "studio": {calcom}}
	cs, err := resource.Plan(s, desired)
	require.NoError(t, err)
	require.Len(t, cs, 2)
	apply(&s, cs...)
	cs, err = resource.Plan(s, desired)
	require.NoError(t, err)
	assert.Empty(t, cs, "the same file twice plans nothing")

	// The file moves the Acuity calendar from dr-smith to the studio: unlink first, then link.
	cs, err = resource.Plan(s, map[string][]string{"dr-smith": {calendly}, "studio": {calcom, acuity}})
	require.NoError(t, err)
	assert.Equal(t, []resource.Change{
		{Type: resource.TypeUnlinked, Name: "dr-smith", Resources: []string{acuity}},
		{Type: resource.TypeLinked, Name: "studio", Resources: []string{acuity}},
	}, cs)

	// A name the file does not list keeps its links; one it takes an identifier from is an error.
	apply(&s, cs...)
	_, err = resource.Plan(s, map[string][]string{"other": {calendly}})
	assert.ErrorIs(t, err, resource.ErrLinkedElsewhere)
}

func TestEventIDDependsOnVersionAndChange(t *testing.T) {
	c := resource.Change{Type: resource.TypeLinked, Name: "dr-smith", Resources: []string{acuity}}
	assert.Equal(t, resource.EventID(3, c), resource.EventID(3, c))
	assert.NotEqual(t, resource.EventID(3, c), resource.EventID(4, c))
	c2 := c
	c2.Type = resource.TypeUnlinked
	assert.NotEqual(t, resource.EventID(3, c), resource.EventID(3, c2))
}
