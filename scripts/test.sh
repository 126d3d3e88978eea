#!/usr/bin/env bash
# `make test`: private throwaway PostgreSQL clusters, lint, the whole suite with -race (the ingress and
# projection suites a second time on EventStoreDB, at the same time), brief fuzzing beside them.
# The clusters are stopped and deleted even when tests fail.
set -euo pipefail
cd "$(dirname "$0")/.."

# The clusters live in memory (/dev/shm, a tmpfs on Linux) when it is there with 4 GB free: they are
# thrown away anyway and run with fsync off, and the suite creates about a thousand databases, each a
# copy of a migrated template's 1,200 files. On this machine's ext4 a file created costs about 0.4 ms
# of kernel time (journal and inode allocation): a CREATE DATABASE took 290 ms of CPU there against
# 25 ms on tmpfs, and PostgreSQL's system time was 110 of make test's 500 CPU-s on two cores.
# BOOKINGLEDGER_TEST_TMPDIR overrides the choice.
tmp=${BOOKINGLEDGER_TEST_TMPDIR:-/tmp}
if [ -z "${BOOKINGLEDGER_TEST_TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] &&
	[ "$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')" -ge $((4 * 1024 * 1024)) ] 2>/dev/null; then
	tmp=/dev/shm
fi
dir=$(mktemp -d "$tmp/bookingledger-test.XXXXXX")
chmod 755 "$dir" # as root the clusters belong to another user, who must reach their directories in it
# Two clusters: the whole suite's, and the EventStoreDB pass's, which runs at the same time. A reader of
# the PostgreSQL log waits for every older transaction of its cluster (transaction ids are
# cluster-wide), so each pass gets a cluster of its own instead of waiting on the other's.
bgpids=() # the passes running in the background, each the leader of a process group of its own (setsid)
cleanup() {
	# A pass still running (the script failed or was interrupted) is ended with its test binaries;
	# a cluster still starting is waited for, then both are stopped.
	for pid in "${bgpids[@]}"; do
		kill -- "-$pid" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	scripts/pg.sh stop "$dir/pg" || true
	scripts/pg.sh stop "$dir/pg-esdb" || true
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The clusters start while lint runs.
scripts/pg.sh start "$dir/pg" --fast >"$dir/pg.url" 2>"$dir/pg.log" &
pgpid=$!
scripts/pg.sh start "$dir/pg-esdb" --fast >"$dir/pg-esdb.url" 2>"$dir/pg-esdb.log" &
pgesdbpid=$!

scripts/lint.sh

wait "$pgpid" || { cat "$dir/pg.log" >&2; exit 1; }
wait "$pgesdbpid" || { cat "$dir/pg-esdb.log" >&2; exit 1; }
url=$(cat "$dir/pg.url")
esdburl=$(cat "$dir/pg-esdb.url")
export BOOKINGLEDGER_TEST_DATABASE_URL="$url"
echo "test: private PostgreSQL at $url (the EventStoreDB pass: $esdburl)"

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
# A real SMTP server for adapters/email's TestSendToARealServerKeepsItsSession: Debian's aiosmtpd, a
# module of Debian's own python3 (skipped without it; CI=true: fail).
if ! /usr/bin/python3 -c 'import aiosmtpd' >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
	echo "test: aiosmtpd not found; installing Debian's python3-aiosmtpd package"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-aiosmtpd >/dev/null
fi
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

# -p 2: the machine has two cores, and PostgreSQL needs its share. -parallel 8: the tests mostly wait
# on PostgreSQL (the suite's packages used a few seconds of CPU per minute of wall time at -parallel 2,
# the default on two cores), and each owns its database. -vet=off: scripts/lint.sh ran go vet -race ./...
# above (test files included), a superset of the checks go test would repeat per package.
# -ldflags=-w: the test binaries are linked without DWARF (a quarter of each link's CPU; panics and race
# reports print their stacks from the symbol table, which stays). The race builds of the packages
# themselves were compiled by lint's go vet -race above and come from the build cache, once for the
# three runs below.
testflags=(-race -vet=off -count=1 -p 2 -parallel 8 -timeout 30m -ldflags=-w)
# The race runtime sleeps a second at every test binary's exit (atexit_sleep_ms, for reports of races
# still being printed); with -p 2 over about 60 binaries and their passes that is half a minute of the
# run's wall time. A race found while a test runs still fails it: the testing package checks for
# reports when each test ends, before the binary exits.
export GORACE="${GORACE:+$GORACE }atexit_sleep_ms=0"

# The ingress and projection suites again with the booking events in EventStoreDB (the test server of
# adapters/esdb/esdbtest; receipts and read models stay in PostgreSQL): the same assertions must hold
# on both stores. Only these packages read BOOKINGLEDGER_TEST_EVENT_STORE. It runs beside the whole
# suite, on its own cluster; its output is shown at the end. The EventStoreDB test server serves inside
# each test binary: the separate non-race server (BOOKINGLEDGER_TEST_ESDB_SERVER, see
# adapters/esdb/esdbtest) saves about 11 CPU-s of these tests, but on a clean clone its non-race build
# compiles the standard library and gRPC a second time, measured at 42 CPU-s.
esdblog="$dir/esdb.log"
BOOKINGLEDGER_TEST_DATABASE_URL="$esdburl" BOOKINGLEDGER_TEST_EVENT_STORE=esdb \
	setsid go test "${testflags[@]}" ./adapters/httpapi ./adapters/postgres/readmodel ./adapters/relay >"$esdblog" 2>&1 &
esdbpid=$!
bgpids+=("$esdbpid")

# The fuzzing runs beside both: the passes mostly wait on their stores, the fuzzers mostly compute.
# A count, not a duration: when a duration runs out while the fuzzer is still handling a new input,
# `go test -fuzz` can report "context deadline exceeded" as a failure without any failing input.
# 1000 inputs per target, --smoke (unguided mutation in the race suite's builds, see scripts/fuzz.sh):
# a check that each target's harness takes mutated inputs past its seeds without a failure or a race
# (the seed corpora run as plain tests in the suite anyway); coverage-guided search is `make fuzz`'s job.
fuzzlog="$dir/fuzz.log"
FUZZTIME=${FUZZTIME:-1000x} setsid scripts/fuzz.sh --smoke >"$fuzzlog" 2>&1 &
fuzzpid=$!
bgpids+=("$fuzzpid")

suite=0
go test "${testflags[@]}" ./... || suite=$?

esdb=0
wait "$esdbpid" || esdb=$?
echo "test: the EventStoreDB pass (./adapters/httpapi ./adapters/postgres/readmodel ./adapters/relay):"
cat "$esdblog"
fuzz=0
wait "$fuzzpid" || fuzz=$?
cat "$fuzzlog"
if [ "$suite" != 0 ] || [ "$esdb" != 0 ] || [ "$fuzz" != 0 ]; then
	[ "$suite" = 0 ] || echo "test: the whole suite failed (its output is above the EventStoreDB pass's)" >&2
	[ "$esdb" = 0 ] || echo "test: the EventStoreDB pass failed (above the fuzzing output)" >&2
	[ "$fuzz" = 0 ] || echo "test: the fuzzing failed (its output is above)" >&2
	exit 1
fi
