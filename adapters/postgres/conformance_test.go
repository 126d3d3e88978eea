package postgres_test

import (
	"testing"

	"bookingledger/adapters/eventlogtest"
	"bookingledger/domain/eventlog"
)

// TestConformance runs the event-store port's suite, each test on a fresh database. The suite calls
// the factory first thing in each of its subtests, so the subtests run in parallel, as the tests do.
func TestConformance(t *testing.T) {
	t.Parallel()
	eventlogtest.Run(t, func(t *testing.T) eventlog.Store {
		t.Parallel()
		s, _ := newStore(t)
		return s
	})
}
