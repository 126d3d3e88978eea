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

# Tools that check the operations examples: promtool (Debian's prometheus package) for the alert rules
# here, nginx for the deploy test's `nginx -t`. As root with apt-get they are installed when missing,
# as scripts/pg.sh does with PostgreSQL; otherwise their checks are skipped, except under CI=true.
ensure_tool() { # ensure_tool COMMAND PACKAGE
	if command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; then
		return 0
	fi
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "test: $1 not found; installing Debian's $2 package"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" >/dev/null
	fi
}
ensure_tool promtool prometheus
ensure_tool nginx nginx
# Real CalDAV servers for adapters/caldav's TestRealServers (skipped without them; CI=true: fail).
ensure_tool radicale radicale
ensure_tool xandikos xandikos
rules=docs/operations/monitoring
if command -v promtool >/dev/null 2>&1; then
	promtool check rules "$rules/alerts.yml"
	promtool test rules "$rules/alerts_test.yml"
elif [ "${CI:-}" = true ]; then
	echo "test: promtool not found and could not be installed; the alert rules must be checked under CI" >&2
	exit 1
else
	echo "test: promtool not found; alert rules not checked (install Debian's prometheus package, or run as root)"
fi

# The browser tests (cmd/bookingledger, TestOperatorUIInABrowser) drive Debian's chromium headless,
# installed when missing like the tools above; without it they skip with a hint (under CI=true they
# fail). Their screenshots go to BOOKINGLEDGER_TEST_ARTIFACTS.
if [ -z "${BOOKINGLEDGER_CHROMIUM:-}" ]; then
	ensure_tool chromium chromium
	command -v chromium >/dev/null 2>&1 ||
		echo "test: chromium not found: browser tests skip (CI=true: fail); install it, e.g. 'sudo apt-get install chromium'"
fi
export BOOKINGLEDGER_TEST_ARTIFACTS="${BOOKINGLEDGER_TEST_ARTIFACTS:-$PWD/.test-artifacts}"
mkdir -p "$BOOKINGLEDGER_TEST_ARTIFACTS"
echo "test: browser screenshots go to $BOOKINGLEDGER_TEST_ARTIFACTS"

# -p 2: the machine has two cores, and PostgreSQL needs its share. -vet=off: scripts/lint.sh ran
# go vet ./... above (test files included), a superset of the checks go test would repeat per package.
go test -race -vet=off -count=1 -p 2 -timeout 30m ./...

# The fuzzing runs while the EventStoreDB pass below does: that pass mostly waits on its stores, the
# fuzzers mostly compute. Its output is shown when it fails, or at the end.
# A count, not a duration: when a duration runs out while the fuzzer is still handling a new input,
# `go test -fuzz` can report "context deadline exceeded" as a failure without any failing input.
fuzzlog="$dir/fuzz.log"
FUZZTIME=${FUZZTIME:-5000x} scripts/fuzz.sh >"$fuzzlog" 2>&1 &
fuzzpid=$!

# The ingress and projection suites again with the booking events in EventStoreDB (the in-process
# test server of adapters/esdb/esdbtest; receipts and read models stay in PostgreSQL): the same
# assertions must hold on both stores. Only these packages read BOOKINGLEDGER_TEST_EVENT_STORE.
esdb=0
BOOKINGLEDGER_TEST_EVENT_STORE=esdb go test -race -vet=off -count=1 -p 2 -timeout 30m ./adapters/httpapi ./adapters/postgres/readmodel ./adapters/relay || esdb=$?

fuzz=0
wait "$fuzzpid" || fuzz=$?
cat "$fuzzlog"
if [ "$esdb" != 0 ] || [ "$fuzz" != 0 ]; then
	[ "$esdb" = 0 ] || echo "test: the EventStoreDB pass failed (above the fuzzing output)" >&2
	exit 1
fi
