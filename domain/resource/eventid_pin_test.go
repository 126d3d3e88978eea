package resource_test

import (
	"testing"

	"bookingledger/domain/resource"
)

// Link event IDs are stored: the derivation must never change (pinned values, computed before the
// UUIDv5 helper moved to domain/eventlog).
func TestEventIDIsPinned(t *testing.T) {
	for _, c := range []struct {
		version uint64
		change  resource.Change
		want    string
	}{
		{0, resource.Change{Type: resource.TypeLinked, Name: "alice", Resources: []string{"calendly:https://api.calendly.com/users/A", "calcom:7"}}, "d779c140-df46-5bc0-bcdb-7a489cbfb153"},
		{41, resource.Change{Type: resource.TypeUnlinked, Name: "bob", Resources: []string{"acuity:12"}}, "77de7867-4cac-5b11-a403-320b8e04ccc2"},
	} {
		if got := resource.EventID(c.version, c.change).String(); got != c.want {
			t.Errorf("EventID(%d, %+v) = %s, want %s", c.version, c.change, got, c.want)
		}
	}
}
