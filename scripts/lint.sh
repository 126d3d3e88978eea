#!/usr/bin/env bash
# gofmt, go vet, and two import rules: domain/ imports only the standard library and itself;
# projections/ only the standard library and domain/ (its storage lives in adapters/).
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.pgdata/*'))
if [ -n "$unformatted" ]; then
	echo "lint: gofmt would change:" >&2
	echo "$unformatted" >&2
	exit 1
fi

go vet ./...

mod=$(go list -m)
# Standard-library packages have no dot in their first path element.
impure=$(go list -deps ./domain/... | grep -v "^$mod/" | awk -F/ '$1 ~ /\./' || true)
if [ -n "$impure" ]; then
	echo "lint: domain/ must import only the standard library, but reaches:" >&2
	echo "$impure" >&2
	exit 1
fi
# The projections' rules are storage-free: no adapter, pgx or other module's package.
reach=$(go list -deps ./projections/... | grep -v "^$mod/domain/" | grep -v "^$mod/projections" | awk -F/ '$1 ~ /\./ || $1 == "'"$mod"'"' || true)
if [ -n "$reach" ]; then
	echo "lint: projections/ must import only the standard library and domain/, but reaches:" >&2
	echo "$reach" >&2
	exit 1
fi
echo "lint: ok (gofmt, go vet, domain imports only the standard library, projections only domain)"
