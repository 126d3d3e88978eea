#!/usr/bin/env bash
# Private PostgreSQL clusters for `make run`, `make test` and `make bench`.
#
#   scripts/pg.sh start DIR [--fast]   init (once) and start a cluster in DIR; prints its URL on stdout
#   scripts/pg.sh stop DIR             stop it (no error when it is not running)
#   scripts/pg.sh url DIR              print the URL of a running cluster
#   scripts/pg.sh status DIR           exit 0 when the cluster in DIR is running
#   scripts/pg.sh resetwal DIR EPOCH   stop it, move it to transaction-id epoch EPOCH (after restoring a
#                                      dump from another cluster: docs/operations/backup.md), start it
#
# The cluster listens on 127.0.0.1 on a port of its own — the one it had last time when that is still
# free, so that a URL written down (make run's demo.env) stays true — and on a unix socket inside DIR, trusts local
# connections and has a database named bookingledger. --fast turns off fsync and autovacuum for
# throwaway test clusters and, as root, reserves huge pages for them (see below). As root (CI, containers) initdb refuses to run, so the cluster
# belongs to the `postgres` system user (or `bookingledger`, created on demand); on a laptop it
# belongs to you.
set -euo pipefail

log() { printf 'pg.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

find_bindir() {
	if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
		dirname "$(readlink -f "$(command -v pg_ctl)")"
		return 0
	fi
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [ -x "$d/pg_ctl" ] && [ -x "$d/initdb" ]; then
			echo "$d"
			return 0
		fi
	done
	return 1
}

ensure_bindir() {
	local d
	if d=$(find_bindir); then
		echo "$d"
		return 0
	fi
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		log "PostgreSQL server binaries not found; installing Debian's postgresql package"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql postgresql-contrib >&2
		d=$(find_bindir) || die "postgresql installed but pg_ctl/initdb still not found"
		echo "$d"
		return 0
	fi
	die "PostgreSQL server binaries (initdb, pg_ctl) not found. Install them, e.g. 'sudo apt-get install postgresql' on Debian/Ubuntu or 'brew install postgresql@15' on macOS, then retry."
}

# run_as runs a command as the cluster owner.
owner=""
pick_owner() {
	if [ "$(id -u)" != 0 ]; then
		owner=$(id -un)
		return
	fi
	if id postgres >/dev/null 2>&1; then
		owner=postgres
	else
		if ! id bookingledger >/dev/null 2>&1; then
			useradd --system --no-create-home --shell /usr/sbin/nologin bookingledger
		fi
		owner=bookingledger
	fi
}
run_as() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u "$owner" -- "$@"
	else
		"$@"
	fi
}

port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# port_range prints the first and last port a cluster's port is drawn from: below the kernel's range
# of ephemeral ports (Linux: /proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default), which
# every listener bound to port 0 and every outgoing connection takes its port from, so that none of
# them can take a stopped cluster's port before it starts again.
port_range() {
	local lo=10000 first
	if read -r first _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null && [ "$first" -gt $((lo + 1000)) ]; then
		echo "$lo $((first - 1))"
	else
		echo "20000 48999" # no such file (macOS: ephemeral ports from 49152), or a range from far down
	fi
}

free_port() {
	local p lo hi
	read -r lo hi < <(port_range)
	for _ in $(seq 1 200); do
		p=$((lo + RANDOM % (hi - lo + 1)))
		if port_free "$p"; then
			echo "$p"
			return 0
		fi
	done
	die "no free TCP port found"
}

# Memory in huge pages, for every cluster (docs/operations/deploy.md, "The database server's memory";
# ADR 0028). The shared memory: as root, where /proc/sys/vm/nr_hugepages is writable, a backend maps
# it with 2 MB pages instead of 4 kB ones, so the page faults and page-table set-up of every new
# connection are a fraction (on the test VM a connection cost the server 27 ms of CPU instead of
# 32.5). The count is machine-wide: start adds the pages this cluster needs and writes the number the
# kernel actually added to DIR/hugepages; stop gives that many back. Both change it under a lock, as
# two clusters start at once (scripts/test.sh). huge_pages=try: without the pages (not root, memory
# too fragmented) the cluster starts with normal pages. A backend's own memory (sorts, hash tables,
# COPY): glibc.malloc.hugetlb=1 has malloc ask for transparent huge pages (madvise), which the
# kernel's default THP mode "madvise" grants; without it the rebuild's sorts and hash joins fault in
# 4 kB at a time (a 1,000,000-event rebuild: the cluster's CPU 25-26 s with both, 31 with the shared
# memory's alone, 38-42 with neither).
hugepages=/proc/sys/vm/nr_hugepages
hugepages_lock=/tmp/bookingledger-hugepages.lock
malloc_tunables=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1
reserve_hugepages() { # reserve_hugepages DIR COUNT
	[ "$(id -u)" = 0 ] && [ -w "$hugepages" ] && [ "$2" -gt 0 ] || return 0
	(
		flock 9
		local before after
		before=$(cat "$hugepages")
		echo $((before + $2)) >"$hugepages" 2>/dev/null || true
		after=$(cat "$hugepages")
		if [ "$after" -lt $((before + $2)) ] && [ -w /proc/sys/vm/compact_memory ]; then
			# Memory too fragmented for that many 2 MB pages (a machine whose page cache is full):
			# compact it once and ask again. Short of pages, the postmaster maps none of them.
			echo 1 >/proc/sys/vm/compact_memory 2>/dev/null || true
			echo $((before + $2)) >"$hugepages" 2>/dev/null || true
			after=$(cat "$hugepages")
		fi
		if [ "$after" -lt $((before + $2)) ]; then
			# Still short: give back what was added. Pages a cluster reserved but cannot map would
			# sit free in the machine-wide pool, where another cluster's postmaster could map them
			# and leave its owner short in turn.
			echo "$before" >"$hugepages" 2>/dev/null || true
			after=$before
		fi
		echo $((after - before)) >"$1/hugepages"
	) 9>"$hugepages_lock" || true
}
# huge_pages_setting DIR prints the cluster's huge_pages setting: try, except for a cluster of root's
# that has no pages of its own reserved (above), which takes none either: off, so that it cannot map
# the pages another cluster reserved and is about to map.
huge_pages_setting() {
	if [ "$(id -u)" = 0 ] && [ -w "$hugepages" ] && [ "$(cat "$1/hugepages" 2>/dev/null || echo 0)" = 0 ]; then
		echo off
	else
		echo try
	fi
}
release_hugepages() { # release_hugepages DIR
	[ -f "$1/hugepages" ] || return 0
	if [ "$(id -u)" = 0 ] && [ -w "$hugepages" ]; then
		(
			flock 9
			local n now
			n=$(cat "$1/hugepages")
			now=$(cat "$hugepages")
			[ "$now" -gt "$n" ] && now=$((now - n)) || now=0
			echo "$now" >"$hugepages" 2>/dev/null || true
		) 9>"$hugepages_lock" || true
	fi
	rm -f "$1/hugepages"
}

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: $0 start|stop|url|status DIR [--fast] | resetwal DIR EPOCH"
fast=0
[ "${3:-}" = "--fast" ] && fast=1

case "$cmd" in
start)
	bindir=$(ensure_bindir)
	pick_owner
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	if [ "$(id -u)" = 0 ]; then
		chown "$owner" "$dir"
		if ! runuser -u "$owner" -- test -w "$dir"; then
			die "$dir is not reachable by the cluster owner '$owner' (a parent directory is private); choose a DIR under /tmp"
		fi
	fi
	if [ -f "$dir/data/postmaster.pid" ] && run_as "$bindir/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
		cat "$dir/url"
		exit 0
	fi
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		run_as "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
			run_as "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --no-locale >"$dir/initdb.log" 2>&1 ||
			{ cat "$dir/initdb.log" >&2; die "initdb failed"; }
	fi
	port=""
	if [ -f "$dir/port" ] && port_free "$(cat "$dir/port")"; then
		port=$(cat "$dir/port")
	fi
	if [ "$fast" = 1 ]; then touch "$dir/fast"; else rm -f "$dir/fast"; fi # for resetwal's restart
	# Another cluster may take a free port between the check and the bind: then try another one.
	for attempt in 1 2 3; do
		[ -n "$port" ] || port=$(free_port)
		opts="-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c max_connections=300 -c shared_buffers=256MB"
		if [ "$fast" = 0 ]; then
			# Parallel queries' shared memory (the rebuild's parallel hash join) in the main segment, so
			# in its huge pages, instead of a segment of 4 kB pages made and faulted in per query (ADR
			# 0028's amendment). Reserved for as long as the cluster runs: not for the test clusters,
			# of which make test runs several at once.
			opts="$opts -c min_dynamic_shared_memory=256MB"
		fi
		if [ "$fast" = 1 ]; then
			opts="$opts -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
			# autovacuum=off: its launcher forks a worker into every database with activity, one about
			# every naptime divided by the number of databases (with a test run's hundreds: several a
			# second), each a new process and backend start, for tables that live a few seconds. The
			# tests that need statistics run ANALYZE themselves.
			opts="$opts -c autovacuum=off"
		fi
		release_hugepages "$dir" # left by a cluster that was not stopped through this script
		reserve_hugepages "$dir" "$(run_as "$bindir/postgres" -D "$dir/data" -C shared_memory_size_in_huge_pages $opts -c huge_pages=try 2>/dev/null || echo 0)"
		opts="$opts -c huge_pages=$(huge_pages_setting "$dir")"
		before=0
		if [ -f "$dir/server.log" ]; then before=$(wc -l <"$dir/server.log"); fi
		if GLIBC_TUNABLES=$malloc_tunables run_as "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -o "$opts" -w -t 60 start >&2; then
			break
		fi
		release_hugepages "$dir"
		if [ "$attempt" = 3 ] || ! tail -n "+$((before + 1))" "$dir/server.log" | grep -q "could not bind"; then
			tail -n 30 "$dir/server.log" >&2
			die "PostgreSQL did not start"
		fi
		log "port $port was taken; trying another"
		port=""
	done
	echo "$port" >"$dir/port"
	run_as "$bindir/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qAtc \
		"SELECT 1 FROM pg_database WHERE datname='bookingledger'" | grep -q 1 ||
		run_as "$bindir/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qc "CREATE DATABASE bookingledger" >&2
	url="postgres://postgres@127.0.0.1:$port/bookingledger?sslmode=disable"
	echo "$url" >"$dir/url"
	echo "$url"
	;;
stop)
	[ -d "$dir/data" ] || exit 0
	bindir=$(ensure_bindir)
	pick_owner
	run_as "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >&2 2>/dev/null || true
	# Only a cluster that is down gives its pages back: the pool shrinks by free pages, and a
	# postmaster still holding its own would make the kernel take another cluster's instead.
	if run_as "$bindir/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
		log "the cluster in $dir is still running; its huge pages stay reserved"
	else
		release_hugepages "$dir"
	fi
	;;
url)
	[ -f "$dir/url" ] || die "no cluster in $dir (run: $0 start $dir)"
	cat "$dir/url"
	;;
status)
	[ -f "$dir/data/postmaster.pid" ] || exit 1
	bindir=$(ensure_bindir)
	pick_owner
	run_as "$bindir/pg_ctl" -D "$dir/data" status >/dev/null 2>&1
	;;
resetwal)
	epoch=${3:-}
	[[ "$epoch" =~ ^[0-9]+$ ]] || die "usage: $0 resetwal DIR EPOCH"
	[ -d "$dir/data" ] || die "no cluster in $dir"
	bindir=$(ensure_bindir)
	pick_owner
	run_as "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >&2 2>/dev/null || true
	release_hugepages "$dir"
	run_as "$bindir/pg_resetwal" -e "$epoch" "$dir/data" >&2
	if [ -f "$dir/fast" ]; then exec "$0" start "$dir" --fast; else exec "$0" start "$dir"; fi
	;;
*)
	die "unknown command $cmd"
	;;
esac
