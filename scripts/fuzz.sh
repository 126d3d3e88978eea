#!/usr/bin/env bash
# Runs every fuzz target (func FuzzXxx in *_test.go) for FUZZTIME each (default 10s).
# Each package's test binary is built once, instrumented for fuzzing as `go test -fuzz` builds it, and
# runs each of its targets in turn (`go test -fuzz` would build and link it again for every target).
# The binary runs in its package's directory, with go test's cache directory for generated inputs, so
# a failing input is written where `go test -fuzz` writes it: testdata/fuzz/<target> of the package.
#
#   scripts/fuzz.sh           coverage-guided fuzzing (make fuzz)
#   scripts/fuzz.sh --smoke   make test's brief pass: the test binaries are built with -race and without
#                             the coverage instrumentation, so the mutator runs unguided (random
#                             mutations of the seeds) while the race detector watches the harness. Its
#                             packages are the race suite's, already compiled: the instrumented build
#                             compiles the standard library and every dependency once more, measured on a
#                             clean clone at 67 CPU-s of make test's 576 on two cores. Searching is
#                             make fuzz's job; the smoke checks that every target takes mutated inputs
#                             past its seeds without a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
buildflags=(-fuzz '^Fuzz')
mode="coverage-guided"
if [ "${1:-}" = --smoke ]; then
	buildflags=(-race)
	mode="unguided, -race"
fi
work=$(mktemp -d /tmp/bookingledger-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
log="$work/log"
gocache=$(go env GOCACHE)
count=0
while IFS= read -r dir; do
	pkg="./$dir"
	targets=$(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)\(' "$dir"/*_test.go | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/' | sort)
	bin="$work/$(echo "$dir" | tr / _).test"
	echo "fuzz: build $pkg"
	# GOGC=400 for the compiler, as in scripts/lint.sh: on a clean clone the instrumented build compiles
	# the standard library and every dependency once more.
	GOGC=${GOGC:-400} go test -c "${buildflags[@]}" -o "$bin" "$pkg" >"$log" 2>&1 || {
		cat "$log" >&2
		echo "fuzz: building $pkg for fuzzing failed" >&2
		exit 1
	}
	importpath=$(go list "$pkg")
	for target in $targets; do
		echo "fuzz: $pkg $target ($fuzztime)"
		(cd "$dir" && "$bin" -test.run '^$' -test.fuzz "^${target}\$" -test.fuzztime "$fuzztime" -test.timeout 10m -test.paniconexit0 \
			-test.fuzzcachedir "$gocache/fuzz/$importpath") >"$log" 2>&1 || {
			cat "$log" >&2
			echo "fuzz: $target in $pkg failed; the failing input is under $pkg/testdata/fuzz/$target" >&2
			exit 1
		}
		count=$((count + 1))
	done
done < <(grep -rlE '^func Fuzz[A-Za-z0-9_]+\(' --include='*_test.go' . | sed 's|^\./||' | xargs -n1 dirname | sort -u)
echo "fuzz: $count targets ran for $fuzztime each ($mode) without a failure"
