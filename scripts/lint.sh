#!/usr/bin/env bash
# gofmt, go vet, and the import rules the doc.go files state: domain/ imports only the standard
# library and itself; projections/ only those and domain/; adapters/jobs and adapters/privacy do not
# import adapters/postgres; and no Go string outside a table's owner names the table
# (scripts/ownercheck, which holds the table -> owner map).
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.pgdata/*'))
if [ -n "$unformatted" ]; then
	echo "lint: gofmt would change:" >&2
	echo "$unformatted" >&2
	exit 1
fi

# -race: vet type-checks every package and its tests from the compiled export data of their imports;
# with the race build's flags, those compilations are the ones `go test -race` (scripts/test.sh) needs
# next, so the suite reuses them from the build cache instead of compiling every package twice.
# GOGC=400 (unless set): on a clean clone these are most of make test's compilations, and the compiler
# collects garbage a quarter as often; measured on two cores with an empty build cache, go build -race
# ./... took 123 CPU-s instead of 155 (GOGC=1000: no further gain). The build cache does not key on
# GOGC, and the test binaries go test runs afterwards keep the default.
GOGC=${GOGC:-400} go vet -race ./...

mod=$(go list -m)
# Standard-library packages have no dot in their first path element.
impure=$(go list -deps ./domain/... | grep -v "^$mod/" | awk -F/ '$1 ~ /\./' || true)
if [ -n "$impure" ]; then
	echo "lint: domain/ must import only the standard library, but reaches:" >&2
	echo "$impure" >&2
	exit 1
fi
# projections/ (the read side's rules) imports the standard library, domain/... and itself only.
impure=$(go list -deps ./projections/... | grep -v -e "^$mod/domain/" -e "^$mod/domain\$" -e "^$mod/projections" | awk -F/ '$1 ~ /\./ || $1 == "'"$mod"'"' || true)
if [ -n "$impure" ]; then
	echo "lint: projections/ must import only the standard library and domain/, but reaches:" >&2
	echo "$impure" >&2
	exit 1
fi

# adapters/jobs and adapters/privacy get the tables of adapters/postgres handed in (their doc.go).
for p in jobs privacy; do
	if go list -deps "./adapters/$p" | grep -qx "$mod/adapters/postgres"; then
		echo "lint: adapters/$p must not import adapters/postgres (directly or not): declare the interface it needs and have cmd/bookingledger pass it in" >&2
		go list -deps "./adapters/$p" | grep "^$mod/adapters/postgres" >&2
		exit 1
	fi
done

# -race: the packages it builds on (the standard library's) are then the ones go vet -race above and
# the race suite compiled; a plain go run compiles them once more on a clean clone (12 CPU-s).
go run -race ./scripts/ownercheck

echo "lint: ok (gofmt, go vet, import rules, table owners)"
