package eventlogtest

import (
	"os"
	"testing"
)

// EnvStore selects the event store that suites able to run on either store use: "postgres" (the
// default) or "esdb" (the in-process EventStoreDB test server). `make test` runs those suites once with
// each.
const EnvStore = "BOOKINGLEDGER_TEST_EVENT_STORE"

// The values of EnvStore.
const (
	StorePostgres = "postgres"
	StoreESDB     = "esdb"
)

// SelectedStore returns the store EnvStore names. Any other value is a mistake in the environment,
// not a reason to quietly test PostgreSQL again: the test fails.
func SelectedStore(tb testing.TB) string {
	tb.Helper()
	switch v := os.Getenv(EnvStore); v {
	case "", StorePostgres:
		return StorePostgres
	case StoreESDB:
		return StoreESDB
	default:
		tb.Fatalf("%s=%q: want %q or %q", EnvStore, v, StorePostgres, StoreESDB)
		return ""
	}
}
