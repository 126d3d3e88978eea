package process

import "testing"

// Step keys are stored and are the targets' idempotency keys: the derivation must never change.
func TestStepKeyIsPinned(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		thread  string
		kind    Kind
		answers string
		want    string
	}{
		{"calendly-a", Kind("host_calendar.create"), "2026-01-02T10:00:00Z", "e7373d10-99ee-5817-add6-335bc45dda1f"},
		{"calcom-b", Kind("invitee_email.cancellation"), "", "87692ba6-b2a5-565d-9d88-0a02eb3ad5fa"},
	} {
		if got := StepKey(c.thread, c.kind, c.answers).String(); got != c.want {
			t.Errorf("StepKey(%q, %q, %q) = %s, want %s", c.thread, c.kind, c.answers, got, c.want)
		}
	}
}
