#!/usr/bin/env bash
# Runs every fuzz target (func FuzzXxx in *_test.go) for FUZZTIME each (default 10s).
# Each package's test binary is built once, instrumented for fuzzing as `go test -fuzz` builds it, and
# runs each of its targets in turn (`go test -fuzz` would build and link it again for every target).
# The binary runs in its package's directory, with go test's cache directory for generated inputs, so
# a failing input is written where `go test -fuzz` writes it: testdata/fuzz/<target> of the package.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
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
	# GOGC=400 for the compiler, as in scripts/lint.sh: a clean clone compiles the standard library
	# and every dependency once more here, instrumented for fuzzing.
	GOGC=${GOGC:-400} go test -c -fuzz '^Fuzz' -o "$bin" "$pkg" >"$log" 2>&1 || {
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
echo "fuzz: $count targets ran for $fuzztime each without a failure"
