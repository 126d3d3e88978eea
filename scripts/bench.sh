#!/usr/bin/env bash
# `make bench`: every benchmark against one private DURABLE PostgreSQL (fsync on), in one run, so the
# ratios compare like with like. Raw output goes to $BENCH_OUT (default /tmp/bookingledger-bench.txt);
# a summary with the ratios the targets name is printed at the end. See docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${BENCH_OUT:-/tmp/bookingledger-bench.txt}
dir=$(mktemp -d /tmp/bookingledger-bench.XXXXXX)
cleanup() {
	scripts/pg.sh stop "$dir" || true
	rm -rf "$dir"
}
trap cleanup EXIT
export BOOKINGLEDGER_TEST_DATABASE_URL=$(scripts/pg.sh start "$dir")
: >"$out"

bench() { # package, benchmark regexp, benchtime
	echo "bench: $1 $2" >&2
	go test -run '^$' -bench "$2" -benchtime "$3" "$1" | tee -a "$out"
}

bench ./adapters/postgres/ 'AppendVsInsert' 3s
bench ./adapters/httpapi/ 'BenchmarkIngest' 3000x
for pkg in ./projections/ ./adapters/postgres/readmodel/; do
	if grep -qs '^func Benchmark' "$pkg"*_test.go; then
		bench "$pkg" '.' 1x
	fi
done

# metric VALUE-NAME LINE-PATTERN: the value before the metric name on the first matching line.
metric() {
	awk -v name="$1" -v pat="$2" '$0 ~ pat { for (i = 2; i <= NF; i++) if ($i == name) { print $(i-1); exit } }' "$out"
}
inserts32=$(metric 'inserts/s' 'new-stream/c=32')
ratio32=$(metric 'append/insert' 'new-stream/c=32')
ingest32=$(metric 'deliveries/s' 'concurrency=32')
p99rate=$(metric 'p99-ms' 'rate=1000')
echo
echo "summary (durable cluster, one run):"
echo "  append / bare INSERT at concurrency 32:        ${ratio32:-?} (target >= 0.5)"
if [ -n "$inserts32" ] && [ -n "$ingest32" ]; then
	echo "  ingest over HTTP / bare INSERT at concurrency 32: $(awk -v a="$ingest32" -v b="$inserts32" 'BEGIN { printf "%.2f", a / b }') (target >= 0.5)"
fi
echo "  ingest p99 at 1,000 req/s:                    ${p99rate:-?} ms (target <= 10 ms)"
echo "raw output: $out"
