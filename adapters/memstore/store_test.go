package memstore_test

import (
	"testing"

	"bookingledger/adapters/eventlogtest"
	"bookingledger/adapters/memstore"
	"bookingledger/domain/eventlog"
)

func TestConformance(t *testing.T) {
	eventlogtest.Run(t, func(*testing.T) eventlog.Store { return memstore.New() })
}
