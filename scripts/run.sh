#!/usr/bin/env bash
# `make run`: a private PostgreSQL in .pgdata (kept between runs), migrations, and `bookingledger serve`
# with webhooks on BOOKINGLEDGER_ADDR (default :8080) and the read API and metrics on
# BOOKINGLEDGER_ADMIN_ADDR (default 127.0.0.1:8081), with demo secrets for every provider. Ctrl-C
# stops the server and the cluster; the data stays until `make clean-pg`.
set -euo pipefail
cd "$(dirname "$0")/.."

pgdir=.pgdata
if [ "$(id -u)" = 0 ] && id postgres >/dev/null 2>&1 && ! runuser -u postgres -- test -x "$PWD"; then
	# The cluster runs as the postgres user, who cannot enter this checkout (e.g. under /root).
	pgdir=/var/tmp/bookingledger-$(printf '%s' "$PWD" | cksum | cut -d' ' -f1)
	echo "run: $PWD is private to root; keeping the cluster in $pgdir instead of .pgdata"
fi

# `make rebuild` (scripts/run.sh rebuild): every projection rebuilt against the same cluster, started
# for the occasion when make run is not running, and stopped again afterwards. The process steps are
# re-planned with make run's targets (the dev sinks' environment, whose ports stay the same).
if [ "${1:-}" = rebuild ]; then
	running=0
	if scripts/pg.sh status "$pgdir"; then running=1; fi
	url=$(scripts/pg.sh start "$pgdir")
	[ "$running" = 1 ] || trap 'scripts/pg.sh stop "$pgdir"' EXIT
	if [ -s "$pgdir/sinks.env" ]; then
		set -a
		# shellcheck disable=SC1091
		. "$pgdir/sinks.env"
		set +a
	fi
	BOOKINGLEDGER_DATABASE_URL="$url" bin/bookingledger rebuild all
	exit
fi

url=$(scripts/pg.sh start "$pgdir")
sinks_pid=
# The sinks may be gone already (Ctrl-C reaches them too): a failed kill must not skip stopping the
# cluster (set -e applies inside the trap).
trap 'if [ -n "$sinks_pid" ]; then kill "$sinks_pid" 2>/dev/null || true; fi; scripts/pg.sh stop "$pgdir"' EXIT

# Local stand-ins for the outside systems (SMTP, CalDAV, ...): `bookingledger dev-sinks` prints what
# each receives and writes the environment that points serve at them. Their lines start "sink:" and,
# on a terminal, are coloured, so that they stand out among serve's JSON logs (NO_COLOR turns it off).
# --state-dir keeps their ports in $pgdir, so demo.env stays true after Ctrl-C and a second make run.
sinks_env="$pgdir/sinks.env"
rm -f "$sinks_env"
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
	sink_prefix=$'s/^\(.*\)$/\x1b[36msink: \1\x1b[0m/'
else
	sink_prefix='s/^/sink: /'
fi
bin/bookingledger dev-sinks --env-file "$sinks_env" --state-dir "$pgdir" > >(sed -u "$sink_prefix") &
sinks_pid=$!
for _ in $(seq 100); do [ -s "$sinks_env" ] && break; sleep 0.1; done
[ -s "$sinks_env" ] || { echo "run: dev-sinks did not start" >&2; exit 1; }
set -a
# shellcheck disable=SC1090
. "$sinks_env"
set +a

# Demo secrets: used only when the variable is not already set. Never use them in production.
: "${BOOKINGLEDGER_CALENDLY_SIGNING_KEYS:=demo-calendly-signing-key}"
: "${BOOKINGLEDGER_CALCOM_SECRETS:=demo-calcom-secret}"
: "${BOOKINGLEDGER_STRIPE_SECRETS:=whsec_demo_stripe_secret}"
: "${BOOKINGLEDGER_STANDARD_SECRETS:=whsec_ZGVtby1zdGFuZGFyZC13ZWJob29rcy1zZWNyZXQ=}"
: "${BOOKINGLEDGER_ACUITY_API_KEYS:=demo-acuity-api-key}"
: "${BOOKINGLEDGER_ACUITY_USER_ID:=demo-acuity-user}"
: "${BOOKINGLEDGER_ADDR:=:8080}"
# The relay may deliver to the dev sink on loopback, and gives up after three quick attempts so the
# tour's failed delivery is dead (and replayable) within seconds.
: "${BOOKINGLEDGER_RELAY_ALLOW_PRIVATE:=true}"
: "${BOOKINGLEDGER_RELAY_SCHEDULE:=0s,2s,5s}"
: "${BOOKINGLEDGER_ADMIN_ADDR:=127.0.0.1:8081}"
# The provider sync reads the dev sinks' fakes of the providers' APIs; the tour wants a disabled
# subscription noticed within seconds, not the production default of 5 minutes.
: "${BOOKINGLEDGER_PROVIDERS_WATCH_INTERVAL:=10s}"
export BOOKINGLEDGER_DATABASE_URL="$url" BOOKINGLEDGER_ADDR BOOKINGLEDGER_ADMIN_ADDR BOOKINGLEDGER_CALENDLY_SIGNING_KEYS \
	BOOKINGLEDGER_CALCOM_SECRETS BOOKINGLEDGER_STRIPE_SECRETS BOOKINGLEDGER_STANDARD_SECRETS \
	BOOKINGLEDGER_ACUITY_API_KEYS BOOKINGLEDGER_ACUITY_USER_ID BOOKINGLEDGER_RELAY_ALLOW_PRIVATE \
	BOOKINGLEDGER_RELAY_SCHEDULE BOOKINGLEDGER_PROVIDERS_WATCH_INTERVAL

# The master key of the receipt bodies' encryption: made once and kept with the cluster (a new one
# each run could not open the bodies stored before). Never use it in production.
masterkey_file="$pgdir/master.key"
if [ -z "${BOOKINGLEDGER_MASTER_KEY:-}" ]; then
	[ -s "$masterkey_file" ] || (umask 077 && bin/bookingledger keys generate --id demo >"$masterkey_file")
	BOOKINGLEDGER_MASTER_KEY=$(cat "$masterkey_file")
fi
export BOOKINGLEDGER_MASTER_KEY

# A demo admin token for /api/ and the UI, made once and kept in $pgdir/demo.token while it is active,
# so that a second shell's demo.env keeps working after Ctrl-C and a second make run. A token revoked
# or gone (another cluster) is replaced.
bin/bookingledger migrate >/dev/null
token_file="$pgdir/demo.token"
BOOKINGLEDGER_TOKEN=
if [ -s "$token_file" ]; then
	saved=$(cat "$token_file")
	# A token is "<prefix><id>_<secret>": it is still good when token list shows its id active.
	while read -r id name _ status _; do
		if [ "$name" = demo-admin ] && [ "$status" = active ] && [[ $saved == *"${id}_"* ]]; then
			BOOKINGLEDGER_TOKEN=$saved
		fi
	done < <(bin/bookingledger token list)
fi
if [ -z "$BOOKINGLEDGER_TOKEN" ]; then
	bin/bookingledger token revoke demo-admin >/dev/null 2>&1 || true
	BOOKINGLEDGER_TOKEN=$(bin/bookingledger token create --name demo-admin --scope admin 2>/dev/null)
	(umask 077 && printf '%s\n' "$BOOKINGLEDGER_TOKEN" >"$token_file")
fi

# ui_host is BOOKINGLEDGER_ADMIN_ADDR as a browser reaches it (":8081" listens on every address).
ui_host() {
	case "$BOOKINGLEDGER_ADMIN_ADDR" in
	:*) echo "localhost$BOOKINGLEDGER_ADMIN_ADDR" ;;
	*) echo "$BOOKINGLEDGER_ADMIN_ADDR" ;;
	esac
}

envfile="$pgdir/demo.env"
cat >"$envfile" <<ENV
BOOKINGLEDGER_DATABASE_URL=$BOOKINGLEDGER_DATABASE_URL
BOOKINGLEDGER_TOKEN=$BOOKINGLEDGER_TOKEN
BOOKINGLEDGER_MASTER_KEY=$BOOKINGLEDGER_MASTER_KEY
BOOKINGLEDGER_CALENDLY_SIGNING_KEYS=$BOOKINGLEDGER_CALENDLY_SIGNING_KEYS
BOOKINGLEDGER_CALCOM_SECRETS=$BOOKINGLEDGER_CALCOM_SECRETS
BOOKINGLEDGER_STRIPE_SECRETS=$BOOKINGLEDGER_STRIPE_SECRETS
BOOKINGLEDGER_STANDARD_SECRETS=$BOOKINGLEDGER_STANDARD_SECRETS
BOOKINGLEDGER_ACUITY_API_KEYS=$BOOKINGLEDGER_ACUITY_API_KEYS
BOOKINGLEDGER_ACUITY_USER_ID=$BOOKINGLEDGER_ACUITY_USER_ID
BOOKINGLEDGER_SEND_TELL_FAKE_API=true
ENV
cat "$sinks_env" >>"$envfile"

cat <<MSG
run: PostgreSQL  $url
run: demo secrets (also in $envfile; load them in another shell with: set -a; . $envfile; set +a)
       BOOKINGLEDGER_CALENDLY_SIGNING_KEYS=$BOOKINGLEDGER_CALENDLY_SIGNING_KEYS
       BOOKINGLEDGER_CALCOM_SECRETS=$BOOKINGLEDGER_CALCOM_SECRETS
       BOOKINGLEDGER_STRIPE_SECRETS=$BOOKINGLEDGER_STRIPE_SECRETS
       BOOKINGLEDGER_STANDARD_SECRETS=$BOOKINGLEDGER_STANDARD_SECRETS
       BOOKINGLEDGER_ACUITY_API_KEYS=$BOOKINGLEDGER_ACUITY_API_KEYS
       BOOKINGLEDGER_ACUITY_USER_ID=$BOOKINGLEDGER_ACUITY_USER_ID
       BOOKINGLEDGER_MASTER_KEY=(demo key, kept in $masterkey_file)
run: dev sinks (lines starting "sink:" are what they received): $(tr '\n' ' ' <"$sinks_env")
run: demo admin token (for /api/ and the UI; also in $envfile as BOOKINGLEDGER_TOKEN)
       $BOOKINGLEDGER_TOKEN
run: webhooks, /healthz, /readyz on $BOOKINGLEDGER_ADDR (public)
run: read API (/api/), operator UI (/ui/), /metrics on $BOOKINGLEDGER_ADMIN_ADDR (admin; /api/ and /ui/ need the token)
run: operator UI  http://$(ui_host)/ui/  (sign in with the token above)
run: Ctrl-C stops the server and the cluster
MSG
bin/bookingledger serve
