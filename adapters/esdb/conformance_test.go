package esdb_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"bookingledger/adapters/esdb"
	"bookingledger/adapters/esdb/esdbtest"
	"bookingledger/adapters/eventlogtest"
	"bookingledger/domain/eventlog"
)

// TestConformance runs the event-store conformance suite against the in-process test server.
func TestConformance(t *testing.T) {
	srv := esdbtest.New(t)
	eventlogtest.Run(t, func(t *testing.T) eventlog.Store {
		return openStore(t, srv.ConnString())
	})
}

// TestConformanceRealServer runs the suite against a real EventStoreDB/KurrentDB node when
// BOOKINGLEDGER_TEST_ESDB_URL names one (e.g. esdb://localhost:2113?tls=false).
func TestConformanceRealServer(t *testing.T) {
	url := os.Getenv("BOOKINGLEDGER_TEST_ESDB_URL")
	if url == "" {
		t.Skip("BOOKINGLEDGER_TEST_ESDB_URL is not set: set it to an esdb:// URL of a real EventStoreDB/KurrentDB node to run the conformance suite against it (not needed in CI)")
	}
	eventlogtest.Run(t, func(t *testing.T) eventlog.Store {
		return openStore(t, url)
	})
}

func openStore(t *testing.T, conn string, opts ...esdb.Option) *esdb.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := esdb.Open(ctx, conn, opts...)
	require.NoError(t, err, "open %s", conn)
	t.Cleanup(s.Close)
	return s
}
