package postgres_test

import (
	"testing"

	"bookingledger/adapters/eventlogtest"
	"bookingledger/domain/eventlog"
)

// TestConformance runs the event-store port's suite, each test on a fresh database.
func TestConformance(t *testing.T) {
	eventlogtest.Run(t, func(t *testing.T) eventlog.Store {
		s, _ := newStore(t)
		return s
	})
}
