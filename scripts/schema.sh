#!/usr/bin/env bash
# `make schema`: regenerate adapters/postgres/schema.sql, the schema the migrations make of an empty
# database (pg_dump --schema-only, normalised; TestSchemaSnapshot fails while they differ). Uses
# BOOKINGLEDGER_TEST_DATABASE_URL's cluster when set, else a private throwaway PostgreSQL.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -z "${BOOKINGLEDGER_TEST_DATABASE_URL:-}" ]; then
	dir=$(mktemp -d /tmp/bookingledger-schema.XXXXXX)
	cleanup() {
		scripts/pg.sh stop "$dir" || true
		rm -rf "$dir"
	}
	trap cleanup EXIT
	BOOKINGLEDGER_TEST_DATABASE_URL=$(scripts/pg.sh start "$dir" --fast)
	export BOOKINGLEDGER_TEST_DATABASE_URL
fi
BOOKINGLEDGER_UPDATE_SCHEMA=1 go test -count=1 -run '^TestSchemaSnapshot$' ./adapters/postgres
git diff --stat -- adapters/postgres/schema.sql
