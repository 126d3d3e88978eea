package main

import (
	"os"
	"strconv"
	"testing"

	"bookingledger/adapters/postgres/pgtest"
)

// TestSeedRebuildLog seeds one of BenchmarkRebuildAtScale's logs into an existing, migrated database
// and keeps it, so that `bookingledger rebuild` can be run and profiled on it by hand, as often as
// needed, without seeding again:
//
//	BOOKINGLEDGER_BENCH_SEED_URL=<database URL> BOOKINGLEDGER_BENCH_SEED_LOG=past90 \
//	BOOKINGLEDGER_BENCH_SEED_EVENTS=1000000 go test -run TestSeedRebuildLog ./cmd/bookingledger
//
// Skipped without BOOKINGLEDGER_BENCH_SEED_URL.
func TestSeedRebuildLog(t *testing.T) {
	url := os.Getenv("BOOKINGLEDGER_BENCH_SEED_URL")
	if url == "" {
		t.Skip("BOOKINGLEDGER_BENCH_SEED_URL not set")
	}
	n, err := strconv.Atoi(os.Getenv("BOOKINGLEDGER_BENCH_SEED_EVENTS"))
	if err != nil || n <= 0 {
		t.Fatalf("BOOKINGLEDGER_BENCH_SEED_EVENTS: %q is not a number of events", os.Getenv("BOOKINGLEDGER_BENCH_SEED_EVENTS"))
	}
	name := os.Getenv("BOOKINGLEDGER_BENCH_SEED_LOG")
	for _, log := range scaleLogs {
		if log.name == name {
			seedCreates(t, pgtest.Open(t, url), n, log)
			return
		}
	}
	t.Fatalf("BOOKINGLEDGER_BENCH_SEED_LOG: no log %q", name)
}
