#!/usr/bin/env bash
# Runs every fuzz target (func FuzzXxx in *_test.go) for FUZZTIME each (default 10s).
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
log=$(mktemp /tmp/bookingledger-fuzz.XXXXXX)
trap 'rm -f "$log"' EXIT
count=0
while IFS= read -r file; do
	pkg="./$(dirname "$file")"
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
		echo "fuzz: $pkg $target ($fuzztime)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1 || {
			cat "$log" >&2
			echo "fuzz: $target in $pkg failed; the failing input is under $pkg/testdata/fuzz/$target" >&2
			exit 1
		}
		count=$((count + 1))
	done
done < <(grep -rlE '^func Fuzz[A-Za-z0-9_]+\(' --include='*_test.go' . | sed 's|^\./||' | sort)
echo "fuzz: $count targets ran for $fuzztime each without a failure"
