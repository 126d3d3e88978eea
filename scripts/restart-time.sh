#!/usr/bin/env bash
# Idle restart to /healthz: starts `serve` RUNS times (default 5) on an already migrated database and
# prints, per run, the wall time from exec to the first 200 from /healthz and serve's own "started"
# line (its phases: migrate, stores, jobs, projections, http). docs/operations/deploy.md, "Restart
# time", has the figures and where the time goes.
#
#   BOOKINGLEDGER_DATABASE_URL=postgres://… scripts/restart-time.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BOOKINGLEDGER_DATABASE_URL:?set BOOKINGLEDGER_DATABASE_URL}"
runs=${1:-5}
bin=$(mktemp -d)/bookingledger
go build -o "$bin" ./cmd/bookingledger
export BOOKINGLEDGER_MASTER_KEY=${BOOKINGLEDGER_MASTER_KEY:-"test:dGVzdC1tYXN0ZXIta2V5LTMyLWJ5dGVzLWxvbmchISE="}
export BOOKINGLEDGER_ADDR=127.0.0.1:18781 BOOKINGLEDGER_ADMIN_ADDR=127.0.0.1:18782 BOOKINGLEDGER_LOG_LEVEL=info
"$bin" migrate >/dev/null
for i in $(seq "$runs"); do
	log=$(mktemp)
	start=$(date +%s%N)
	"$bin" serve >/dev/null 2>"$log" &
	pid=$!
	until curl -fsS -o /dev/null "http://$BOOKINGLEDGER_ADDR/healthz" 2>/dev/null; do sleep 0.005; done
	end=$(date +%s%N)
	kill -TERM "$pid"
	wait "$pid" || true
	echo "run $i: $(( (end - start) / 1000000 )) ms to /healthz; $(grep -o '"msg":"started".*' "$log" | tr -d '}')"
	rm -f "$log"
done
