package resource_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/domain/resource"
)

func TestNameAndIdentifierBounds(t *testing.T) {
	assert.NoError(t, resource.ValidateName(strings.Repeat("a", resource.MaxNameLength)))
	assert.ErrorIs(t, resource.ValidateName(strings.Repeat("a", resource.MaxNameLength+1)), resource.ErrInvalid)
	assert.NoError(t, resource.ValidateName("dr.smith_2-b"))
	assert.NoError(t, resource.ValidateIdentifier(strings.Repeat("a", resource.MaxIdentifierLength)))
	assert.ErrorIs(t, resource.ValidateIdentifier(strings.Repeat("a", resource.MaxIdentifierLength+1)), resource.ErrInvalid)
	assert.ErrorIs(t, resource.ValidateIdentifier("cal\xff"), resource.ErrInvalid)
}

// A name that is an identifier linked to another name cannot be linked (chains would make the
// canonical resource depend on order); a name may list itself as one of its identifiers.
func TestLinkNamesAndIdentifiers(t *testing.T) {
	s := resource.Fold(nil)
	c, err := resource.Link(s, "dr-smith", []string{acuity})
	require.NoError(t, err)
	apply(&s, *c)
	_, err = resource.Link(s, acuity, []string{calcom})
	assert.ErrorIs(t, err, resource.ErrLinkedElsewhere)

	c, err = resource.Link(s, "dr-smith", []string{"dr-smith"})
	require.NoError(t, err)
	assert.Equal(t, []string{"dr-smith"}, c.Resources)
}

// A plan that gives one identifier to two names is refused, and its changes come in name order.
func TestPlanRefusesOneIdentifierForTwoNamesAndIsOrdered(t *testing.T) {
	_, err := resource.Plan(resource.Fold(nil), map[string][]string{"a": {calcom}, "b": {calcom}})
	assert.ErrorIs(t, err, resource.ErrLinkedElsewhere)

	desired := map[string][]string{"e": {"e1"}, "d": {"d1"}, "c": {"c1"}, "b": {"b1"}, "a": {"a1"}}
	for range 20 { // map order differs from run to run
		cs, err := resource.Plan(resource.Fold(nil), desired)
		require.NoError(t, err)
		var names []string
		for _, c := range cs {
			names = append(names, c.Name)
		}
		require.Equal(t, []string{"a", "b", "c", "d", "e"}, names)
	}
}

// An unlink frees only identifiers still linked to its name.
func TestUnlinkEventLeavesAnotherNamesLink(t *testing.T) {
	s := resource.Fold([]resource.Event{
		{Type: resource.TypeLinked, Name: "studio", Resources: []string{calcom}},
		{Type: resource.TypeUnlinked, Name: "dr-smith", Resources: []string{calcom}},
	})
	assert.Equal(t, "studio", s.Canonical(calcom))
}

func TestEventIDSeparatesIdentifiers(t *testing.T) {
	one := resource.Change{Type: resource.TypeLinked, Name: "n", Resources: []string{"ab"}}
	two := resource.Change{Type: resource.TypeLinked, Name: "n", Resources: []string{"a", "b"}}
	assert.NotEqual(t, resource.EventID(1, one), resource.EventID(1, two))
}
