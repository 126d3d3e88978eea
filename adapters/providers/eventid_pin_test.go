package providers_test

import (
	"testing"

	"bookingledger/adapters/providers"
)

// Event IDs are how redeliveries are recognised: the derivation must never change (pinned values).
func TestEventIDIsPinned(t *testing.T) {
	for _, c := range []struct{ provider, identity, want string }{
		{"calendly", "invitee:https://api.calendly.com/scheduled_events/E/invitees/I:created", "d3f41fc1-667d-5c4e-b76c-02306402fdda"},
		{"stripe", "evt_1", "03125321-6f3e-50f1-83f0-f61856f45574"},
	} {
		if got := providers.EventID(c.provider, c.identity).String(); got != c.want {
			t.Errorf("EventID(%q, %q) = %s, want %s", c.provider, c.identity, got, c.want)
		}
	}
}
