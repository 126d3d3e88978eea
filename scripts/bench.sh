#!/usr/bin/env bash
# `make bench`: every benchmark against one private DURABLE PostgreSQL (fsync on), in one run, so the
# ratios compare like with like. Raw output goes to $BENCH_OUT (default /tmp/bookingledger-bench.txt);
# a summary with the figures the targets name is printed at the end. See docs/benchmarks.md.
#
#   scripts/bench.sh                  run everything, then summarise
#   scripts/bench.sh --summary FILE   summarise the raw output of an earlier run
#
# Sizes (defaults are the documented runs): BENCH_REBUILD_EVENTS (50000 events replayed by the rebuild
# benchmark, 3 runs), BENCH_LAG_DELIVERIES (300 deliveries per projection-lag run, 3 runs),
# BENCH_KEEPUP_DURATION (60s of closed-loop ingest at c=16 while the calendar's lag is measured; a Go
# duration, e.g. 10s for a quick local run),
# BENCH_REBUILD_SIZES (log sizes `bookingledger rebuild` is measured at from outside, rate and peak
# RSS: 250000,1000000; the documented large run adds 5000000), BENCH_ANCHOR_DURATION (3s of load per
# point of the whole serve against the hand-written handler; a Go duration).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${BENCH_OUT:-/tmp/bookingledger-bench.txt}
rebuild_events=${BENCH_REBUILD_EVENTS:-50000}
lag_deliveries=${BENCH_LAG_DELIVERIES:-300}
keepup_duration=${BENCH_KEEPUP_DURATION:-60s}
rebuild_sizes=${BENCH_REBUILD_SIZES:-250000,1000000}
anchor_duration=${BENCH_ANCHOR_DURATION:-3s}

# metric VALUE-NAME LINE-PATTERN: the value before the metric name on the first matching line.
metric() {
	awk -v name="$1" -v pat="$2" '$0 ~ pat { for (i = 2; i <= NF; i++) if ($i == name) { print $(i-1); exit } }' "$out"
}
# metrics VALUE-NAME LINE-PATTERN: the values on every matching line (one line per -count run),
# comma-separated.
metrics() {
	awk -v name="$1" -v pat="$2" '$0 ~ pat { for (i = 2; i <= NF; i++) if ($i == name) { v = v (v == "" ? "" : ", ") $(i-1) } }
		END { print v }' "$out"
}

# anchor_ratio C: mean deliveries/s of bookingledger over the hand-written handler's at concurrency C,
# over every round of BenchmarkIngestVsHandwritten, with both means and each round's own ratio (a
# round is bookingledger's line and the handler's after it).
anchor_ratio() {
	awk -v c="c=$1/" '$1 ~ "^BenchmarkIngestVsHandwritten/" c {
		for (i = 2; i <= NF; i++) if ($i == "deliveries/s") v = $(i-1)
		if ($1 ~ "/bookingledger") { bl += v; nb++; last = v } else if ($1 ~ "/handwritten") {
			hw += v; nh++; if (last) rounds = rounds (rounds == "" ? "" : " / ") sprintf("%.2f", last / v); last = 0 }
	} END { if (nb && nh) printf "%.2f (%.0f vs %.0f deliveries/s; rounds %s)", (bl/nb)/(hw/nh), bl/nb, hw/nh, rounds; else print "?" }' "$out"
}

# serve_anchor C: the whole `serve` as shipped against the hand-written handler, each a process of its
# own (BenchmarkServeVsHandwritten), at concurrency C over every round: the ratio of the mean
# deliveries/s (each round's own ratio after it), both sides' mean p50/p99, and the mean CPU per
# delivery split server / PostgreSQL / load generator, with the ratio of server + PostgreSQL.
serve_anchor() {
	awk -v c="c=$1/" -v target="$2" -v cputarget="$3" '$1 ~ "^BenchmarkServeVsHandwritten/" c {
		side = ($1 ~ "/serve") ? "s" : "h"
		for (i = 2; i <= NF; i++) {
			m = $i; v = $(i-1)
			if (m == "deliveries/s") { rate[side] += v; n[side]++; this = v }
			if (m == "p50-ms") p50[side] += v
			if (m == "p99-ms") p99[side] += v
			if (m == "server-us/delivery") srv[side] += v
			if (m == "pg-us/delivery") pg[side] += v
			if (m == "loadgen-us/delivery") lg[side] += v
			if (m == "total-us/delivery") { tot[side] += v; nt[side]++ }
			if (m == "idle-cpu-ms/s") idle[side] += v
		}
		if (side == "s") last = this; else if (last) { rounds = rounds (rounds == "" ? "" : " / ") sprintf("%.2f", last / this); last = 0 }
	}
	END {
		if (!n["s"] || !n["h"]) { print "?"; exit }
		rs = rate["s"] / n["s"]; rh = rate["h"] / n["h"]
		printf "rate %.2f (target >= %s; %.0f vs %.0f deliveries/s; rounds %s); p50 %.1f vs %.1f ms, p99 %.1f vs %.1f ms", rs / rh, target, rs, rh, rounds, p50["s"] / n["s"], p50["h"] / n["h"], p99["s"] / n["s"], p99["h"] / n["h"]
		if (nt["s"] && nt["h"]) {
			printf "; CPU us/delivery server %.0f vs %.0f, PostgreSQL %.0f vs %.0f, load generator %.0f vs %.0f; server + PostgreSQL %.0f vs %.0f = %.2fx", srv["s"] / nt["s"], srv["h"] / nt["h"], pg["s"] / nt["s"], pg["h"] / nt["h"], lg["s"] / nt["s"], lg["h"] / nt["h"], tot["s"] / nt["s"], tot["h"] / nt["h"], (tot["s"] / nt["s"]) / (tot["h"] / nt["h"])
			if (cputarget != "") printf " (target <= %s)", cputarget
			printf "; idle CPU %.0f vs %.0f ms/s", idle["s"] / nt["s"], idle["h"] / nt["h"]
		}
		print ""
	}' "$out"
}

summary() {
	local inserts32 ratio32 ingest32 p99rate lagp99 lagp50 commitp99 ratelagp99 ratelagp50 rebuild ratio incremental
	inserts32=$(metric 'inserts/s' 'new-stream/c=32')
	ratio32=$(metric 'append/insert' 'new-stream/c=32')
	ingest32=$(metric 'deliveries/s' 'concurrency=32')
	p99rate=$(metric 'p99-ms' 'rate=1000')
	lagp50=$(metrics 'p50-ms' '^BenchmarkProjectionLag-')
	lagp99=$(metrics 'p99-ms' '^BenchmarkProjectionLag-')
	commitp99=$(metrics 'commit-p99-ms' '^BenchmarkProjectionLag-')
	ratelagp99=$(metric 'lag-p99-ms' '^BenchmarkProjectionLagAtRate')
	ratelagp50=$(metric 'lag-p50-ms' '^BenchmarkProjectionLagAtRate')
	rebuild=$(metric 'events/s' '^BenchmarkRebuild/buffered')
	ratio=$(metric 'rebuild/scan' '^BenchmarkRebuild/buffered')
	incremental=$(metric 'events/s' '^BenchmarkRebuild/chunk=')
	echo
	echo "summary (durable cluster, one run):"
	echo "  append / bare INSERT at concurrency 32:        ${ratio32:-?} (target >= 0.5)"
	if [ -n "$inserts32" ] && [ -n "$ingest32" ]; then
		echo "  ingest over HTTP / bare INSERT at concurrency 32: $(awk -v a="$ingest32" -v b="$inserts32" 'BEGIN { printf "%.2f", a / b }') (for reference; the ingest target is the hand-written handler below)"
	fi
	local c target cputarget
	for c in 1 8 32; do
		case $c in 1) target=0.7 ;; 8) target=0.67 cputarget=1.5 ;; 32) target=1.0 ;; esac
		[ "$c" = 8 ] || cputarget=
		echo "  whole serve as shipped / hand-written handler, separate processes, c=$c: $(serve_anchor "$c" "$target" "$cputarget")"
	done
	for c in 1 8 32; do
		case $c in 1) target=0.7 ;; 8) target=0.8 ;; 32) target=1.0 ;; esac
		echo "  ingest only, in process, no projections / hand-written handler at concurrency $c: $(anchor_ratio "$c") (issue #12 target >= $target)"
	done
	echo "  ingest p99 at 1,000 req/s:                    ${p99rate:-?} ms (target <= 10 ms)"
	echo "  projection lag commit -> visible, p99:        ${lagp99:-?} ms per run (p50 ${lagp50:-?} ms; ledger commit p99 ${commitp99:-?} ms)"
	echo "  projection lag at 1,000 req/s via /api/calendar, p99: ${ratelagp99:-?} ms (target <= 100 ms; p50 ${ratelagp50:-?} ms)"
	local k='^BenchmarkProjectionKeepsUp'
	echo "  projection keeps up at c=16 closed loop ($(metric 'deliveries/s' "$k") deliveries/s for ${keepup_duration}): lag p99 $(metric 'lag-p99-ms' "$k") ms (target <= 1000; p50 $(metric 'lag-p50-ms' "$k") ms), p99 in the first/last sixth of the load $(metric 'lag-p99-first-ms' "$k")/$(metric 'lag-p99-last-ms' "$k") ms (target: not growing), drain $(metric 'drain-ms' "$k") ms (target <= 2000), projected $(metric 'projected/s' "$k")/s"
	echo "  step lag ack -> both steps done at 200 bookings/s: p50 $(metric 'p50-ms' '^BenchmarkStepLagAtRate') ms, p99 $(metric 'p99-ms' '^BenchmarkStepLagAtRate') ms (first half p99 $(metric 'first-half-p99-ms' '^BenchmarkStepLagAtRate'), second half p99 $(metric 'second-half-p99-ms' '^BenchmarkStepLagAtRate') ms; completed $(metric 'completed-ratio' '^BenchmarkStepLagAtRate')); the same serve's second round (warm): p50 $(metric 'warm-p50-ms' '^BenchmarkStepLagAtRate') ms, p99 $(metric 'warm-p99-ms' '^BenchmarkStepLagAtRate') ms (completed $(metric 'warm-completed-ratio' '^BenchmarkStepLagAtRate')); CPU per booking (serve, sinks, load generator and PostgreSQL) $(metric 'cpu-us/booking' '^BenchmarkStepLagAtRate') us, warm $(metric 'warm-cpu-us/booking' '^BenchmarkStepLagAtRate') us (PostgreSQL $(metric 'warm-pg-us/booking' '^BenchmarkStepLagAtRate'))"
	echo "  relay lag commit -> receiver at 1,000 events/s: p50 $(metric 'lag-p50-ms' '^BenchmarkRelayLag') ms, p99 $(metric 'lag-p99-ms' '^BenchmarkRelayLag') ms (first half p99 $(metric 'first-half-lag-p99-ms' '^BenchmarkRelayLag'), second half p99 $(metric 'second-half-lag-p99-ms' '^BenchmarkRelayLag') ms; $(metric 'ingest-events/s' '^BenchmarkRelayLag') events/s reached)"
	echo "  burst of 50 deliveries x 100 copies at a bound of 8 (issue #36): $(awk '/^--- (PASS|FAIL): TestBurstAtTheRecordBound/ { r = $2; sub(/:$/, "", r) } /burst_test.go:[0-9]+: [0-9]+ requests:/ { sub(/^.*burst_test.go:[0-9]+: /, ""); l = $0 } END { print (r == "" ? "?" : r) (l == "" ? "" : " (" l ")") }' "$out")"
	echo "  rebuild rate, buffered:                       ${rebuild:-?} events/s (target >= 50000; rebuild/scan ${ratio:-?}; in chunks of 1,000 bookings ${incremental:-?} events/s)"
	local line
	while read -r line; do
		[ -n "$line" ] && echo "  bookingledger rebuild, $line"
	done < <(awk '$1 ~ /^BenchmarkRebuildAtScale\/log=/ {
		n = $1; sub(/^BenchmarkRebuildAtScale\/log=/, "", n); sub(/-[0-9]+$/, "", n); split(n, p, "/events=")
		delete ph; r = m = c = g = ""
		for (i = 2; i <= NF; i++) {
			if ($i == "events/s") r = $(i-1); if ($i == "peak-rss-MB") m = $(i-1)
			if ($i == "rebuild-cpu-us/event") c = $(i-1); if ($i == "pg-cpu-us/event") g = $(i-1)
			if ($i ~ /-s$/) ph[substr($i, 1, length($i) - 2)] = $(i-1) + 0
		}
		printf "%s events, %s log: %s events/s, peak RSS %s MB (targets >= 50000 events/s, <= 400 MB); CPU per event %s us rebuild + %s us PostgreSQL; phases fold %.1fs, lone %.1fs, compute %.1fs, index %.1fs, swap %.1fs\n",
			p[2], p[1], r, m, c, (g == "" ? "?" : g), ph["fold"], ph["lone"], ph["compute"], ph["index"], ph["swap"] }' "$out")
	echo "raw output: $out"
}

if [ "${1:-}" = "--summary" ]; then
	out=${2:?usage: scripts/bench.sh --summary FILE}
	summary
	exit 0
fi

dir=$(mktemp -d /tmp/bookingledger-bench.XXXXXX)
cleanup() {
	scripts/pg.sh stop "$dir" || true
	rm -rf "$dir"
}
trap cleanup EXIT
export BOOKINGLEDGER_TEST_DATABASE_URL=$(scripts/pg.sh start "$dir")
: >"$out"

bench() { # package, benchmark regexp, benchtime, extra go test flags...
	local pkg=$1 re=$2 bt=$3
	shift 3
	echo "bench: $pkg $re" >&2
	go test -run '^$' -bench "$re" -benchtime "$bt" "$@" "$pkg" | tee -a "$out"
}

bench ./adapters/postgres/ 'AppendVsInsert' 3s
bench ./adapters/httpapi/ '^BenchmarkIngest$' 3000x
# The ingest alone (in process, no projections) against the hand-written dedupe-table handler, in three rounds of the whole benchmark
# (each: c=1, 8, 32, bookingledger then the handler), so that drift hits both (docs/benchmarks.md,
# "Ingest against the hand-written handler"). -count 3 would not alternate: it runs each side's rounds
# back to back.
for _ in 1 2 3; do
	bench ./adapters/httpapi/ '^BenchmarkIngestVsHandwritten$' 3000x
done
# The whole `serve` as shipped (a process built from cmd/bookingledger, its projections on, default
# settings) against the hand-written handler as a process of its own, over HTTP: three alternated
# rounds of c=1, 8, 32, BENCH_ANCHOR_DURATION (default 3s) of load per point; rates, p50/p99 and CPU
# per delivery from /proc split server / PostgreSQL / load generator (docs/benchmarks.md, "The whole
# serve against the hand-written handler").
BOOKINGLEDGER_BENCH_ANCHOR_DURATION=$anchor_duration bench ./cmd/bookingledger/ '^BenchmarkServeVsHandwritten$' 1x -timeout 30m
# The projection benchmarks need a fixed number of iterations: each rebuild iteration replays the whole
# seeded log, and the lag percentiles are over the deliveries of one run (three runs show the spread).
BOOKINGLEDGER_BENCH_EVENTS=$rebuild_events bench ./adapters/postgres/readmodel/ '^BenchmarkRebuild$' 3x
bench ./adapters/postgres/readmodel/ '^BenchmarkProjectionLag$' "${lag_deliveries}x" -count 3
# The rebuild command from outside: a child process's wall time and peak RSS on logs COPY'd into the
# events table (docs/benchmarks.md, "Rebuild at scale").
BOOKINGLEDGER_BENCH_REBUILD_SIZES=$rebuild_sizes bench ./cmd/bookingledger/ '^BenchmarkRebuildAtScale$' 1x -timeout 2h
# Ack -> visible through GET /api/calendar while deliveries arrive at 1,000 req/s: one round of
# BOOKINGLEDGER_BENCH_LAG_DELIVERIES (default 3,000) deliveries.
bench ./adapters/httpapi/ '^BenchmarkProjectionLagAtRate$' 1x
# The projection against the fastest sustained ingest: 16 closed-loop senders for BENCH_KEEPUP_DURATION,
# calendar lag over time and the drain after the load ends (docs/benchmarks.md, "Does the projection keep up").
BOOKINGLEDGER_BENCH_KEEPUP_DURATION=$keepup_duration bench ./adapters/httpapi/ '^BenchmarkProjectionKeepsUp$' 1x
# Ack -> both process steps done (in-process CalDAV and SMTP sinks) while bookings arrive at 200/s: one
# round of BOOKINGLEDGER_BENCH_STEP_DELIVERIES (default 2,000) bookings (docs/process-steps.md).
bench ./cmd/bookingledger/ '^BenchmarkStepLagAtRate$' 1x
# Issue #36's full retry storm at the real binary: 50 deliveries x 100 concurrent copies (5,000 requests
# at once) against a recording bound of 8; a test (pass/fail), run here at full size because
# `make test` runs it at 20 copies (docs/operations/scaling.md, "Bursts").
echo "test: TestBurstAtTheRecordBound at 100 copies" >&2
BOOKINGLEDGER_TEST_BURST_COPIES=100 go test -count 1 -run '^TestBurstAtTheRecordBound$' -v ./cmd/bookingledger/ | grep -E '^(---|    burst_test|ok|FAIL)' | tee -a "$out" ||
	echo "--- FAIL: TestBurstAtTheRecordBound (see above)" | tee -a "$out"
# Commit -> first arrival at a fast local receiver while events are committed at 1,000/s (docs/relay.md).
bench ./adapters/relay/ '^BenchmarkRelayLagAt1000EventsPerSecond$' 3000x

summary
