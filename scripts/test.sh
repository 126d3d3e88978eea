#!/usr/bin/env bash
# `make test`: a private throwaway PostgreSQL, lint, the whole suite with -race (the ingress and
# projection suites a second time on EventStoreDB), brief fuzzing.
# The cluster is stopped and deleted even when tests fail.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=$(mktemp -d /tmp/bookingledger-test.XXXXXX)
cleanup() {
	scripts/pg.sh stop "$dir" || true
	rm -rf "$dir"
}
trap cleanup EXIT

url=$(scripts/pg.sh start "$dir" --fast)
export BOOKINGLEDGER_TEST_DATABASE_URL="$url"
echo "test: private PostgreSQL at $url"

scripts/lint.sh

# -p 2: the machine has two cores, and PostgreSQL needs its share.
go test -race -count=1 -p 2 -timeout 30m ./...

# The ingress and projection suites again with the booking events in EventStoreDB (the in-process
# test server of adapters/esdb/esdbtest; receipts and read models stay in PostgreSQL): the same
# assertions must hold on both stores. Only these packages read BOOKINGLEDGER_TEST_EVENT_STORE.
BOOKINGLEDGER_TEST_EVENT_STORE=esdb go test -race -count=1 -p 2 -timeout 30m ./adapters/httpapi ./adapters/postgres/readmodel

# A count, not a duration: when a duration runs out while the fuzzer is still handling a new input,
# `go test -fuzz` can report "context deadline exceeded" as a failure without any failing input.
FUZZTIME=${FUZZTIME:-5000x} scripts/fuzz.sh
