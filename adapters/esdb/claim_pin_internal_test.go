package esdb

import (
	"testing"

	"bookingledger/domain/eventlog"
)

// Claim event IDs are stored in EventStoreDB: the derivation must never change (pinned values).
func TestClaimEventIDIsPinned(t *testing.T) {
	id, err := eventlog.ParseEventID("5f0d7d2e-1c4b-5a39-8e2f-0a1b2c3d4e5f")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ stream, want string }{
		{"booking-calendly-a", "baf3354f-4662-5da3-9f39-0da7e41c09f0"},
		{"resources", "059a19c4-0135-5805-b3cb-eba91901fcb3"},
	} {
		if got := claimEventID(id, c.stream).String(); got != c.want {
			t.Errorf("claimEventID(%s, %q) = %s, want %s", id, c.stream, got, c.want)
		}
	}
}
