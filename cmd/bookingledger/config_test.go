package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestExitCodesAndMessages(t *testing.T) {
	const dead = "postgres://bl@127.0.0.1:1/nowhere?connect_timeout=1"
	// deadDB: a command that gets as far as the database fails with exit 1, so a usage error it
	// should have found first shows as the wrong code.
	deadDB := map[string]string{"DATABASE_URL": dead}
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		code    int
		message string // on stderr (or stdout for code 0)
		absent  string // must not appear on stderr
	}{
		{name: "no command", args: nil, code: 2, message: "no command given"},
		{name: "unknown command", args: []string{"serv"}, code: 2, message: `unknown command "serv"`},
		{name: "help", args: []string{"help"}, code: 0, message: "bookingledger serve"},
		{name: "version", args: []string{"version"}, code: 0, message: "bookingledger "},
		{name: "serve -h", args: []string{"serve", "-h"}, code: 0},
		{name: "serve without database", args: []string{"serve"}, code: 2, message: "BOOKINGLEDGER_DATABASE_URL (or DATABASE_URL) is not set"},
		{name: "bad body cap", args: []string{"serve"}, env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_MAX_BODY_BYTES": "1MB"}, code: 2, message: `BOOKINGLEDGER_MAX_BODY_BYTES="1MB": not an integer`},
		{name: "zero body cap", args: []string{"serve"}, env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_MAX_BODY_BYTES": "0"}, code: 2, message: "BOOKINGLEDGER_MAX_BODY_BYTES=\"0\": must be at least 1"},
		{name: "bad tolerance", args: []string{"serve"}, env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_CALENDLY_TOLERANCE": "3 minutes"}, code: 2, message: "BOOKINGLEDGER_CALENDLY_TOLERANCE"},
		{name: "negative tolerance", args: []string{"serve"}, env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_CALENDLY_TOLERANCE": "-1s"}, code: 2, message: "must be positive"},
		{name: "negative reject rate", args: []string{"serve"}, env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_REJECT_RECEIPTS_PER_MINUTE": "-1"}, code: 2, message: "BOOKINGLEDGER_REJECT_RECEIPTS_PER_MINUTE"},
		{name: "bad drain timeout", args: []string{"serve"}, env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_DRAIN_TIMEOUT": "soon"}, code: 2, message: "BOOKINGLEDGER_DRAIN_TIMEOUT"},
		{name: "unknown event store", args: []string{"serve"}, env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_EVENT_STORE": "mysql"}, code: 2, message: "BOOKINGLEDGER_EVENT_STORE"},
		{name: "malformed esdb URL", args: []string{"serve"}, env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_EVENT_STORE": "esdb://admin:pw123@host:notaport?tls=false"}, code: 2, message: "BOOKINGLEDGER_EVENT_STORE: esdb: invalid connection string", absent: "pw123"},
		{name: "invalid standard secret", args: []string{"serve"}, env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_STANDARD_SECRETS": "whsec_not*base64"}, code: 2, message: "BOOKINGLEDGER_STANDARD_SECRETS: standard webhooks secret 0", absent: "not*base64"},
		{name: "bad log level", args: []string{"serve", "--log-level", "loud"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "--log-level"},
		{name: "unknown flag", args: []string{"serve", "--colour"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "flag provided but not defined"},
		{name: "stray argument", args: []string{"serve", "now"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "serve takes no arguments"},
		{name: "flag overrides a bad variable", args: []string{"serve", "--max-body-bytes", "10"}, env: map[string]string{"BOOKINGLEDGER_MAX_BODY_BYTES": "lots"}, code: 2, message: "BOOKINGLEDGER_DATABASE_URL", absent: "lots"},
		{name: "unparsable database URL", args: []string{"serve"}, env: map[string]string{"BOOKINGLEDGER_DATABASE_URL": "postgres://u:secretpw@host:notaport/db", "BOOKINGLEDGER_MASTER_KEY": testMasterKey}, code: 2, message: "BOOKINGLEDGER_DATABASE_URL: not a valid", absent: "secretpw"},
		{name: "unreachable database", args: []string{"serve"}, env: map[string]string{"BOOKINGLEDGER_DATABASE_URL": dead, "BOOKINGLEDGER_MASTER_KEY": testMasterKey}, code: 1, message: "migrate on start"},
		{name: "serve without master key", args: []string{"serve"}, env: map[string]string{"BOOKINGLEDGER_DATABASE_URL": dead}, code: 2, message: "BOOKINGLEDGER_MASTER_KEY is not set"},
		{name: "malformed master key", args: []string{"serve"}, env: map[string]string{"BOOKINGLEDGER_DATABASE_URL": dead, "BOOKINGLEDGER_MASTER_KEY": "k1:c2hvcnQ="}, code: 2, message: "has 5 bytes, want 32", absent: "c2hvcnQ="},
		{name: "erase without subject", args: []string{"erase"}, env: map[string]string{"BOOKINGLEDGER_DATABASE_URL": dead}, code: 2, message: "exactly one of --booking and --email"},
		{name: "keys rewrap without master key", args: []string{"keys", "rewrap"}, env: map[string]string{"BOOKINGLEDGER_DATABASE_URL": dead}, code: 2, message: "BOOKINGLEDGER_MASTER_KEY is not set"},
		{name: "migrate without database", args: []string{"migrate"}, code: 2, message: "DATABASE_URL"},
		{name: "migrate unreachable", args: []string{"migrate"}, env: map[string]string{"DATABASE_URL": dead}, code: 1, message: "migrate:"},
		{name: "send without arguments", args: []string{"send"}, code: 2, message: "send wants <provider> <event>"},
		{name: "send unknown provider", args: []string{"send", "zoom", "x"}, code: 2, message: `unknown provider "zoom"`},
		{name: "send unknown event", args: []string{"send", "calendly", "invitee.exploded", "--secret", "k"}, code: 2, message: "invitee.exploded"},
		{name: "send without secret", args: []string{"send", "calendly", "invitee.created"}, code: 2, message: "BOOKINGLEDGER_CALENDLY_SIGNING_KEYS is not set"},
		{name: "send bad start", args: []string{"send", "calendly", "invitee.created", "--secret", "k", "--start", "tomorrow"}, code: 2, message: "--start"},
		{name: "send bad repeat", args: []string{"send", "calendly", "invitee.created", "--secret", "k", "--repeat", "0"}, code: 2, message: "must be at least 1"},
		{name: "send to nothing listening", args: []string{"send", "calendly", "invitee.created", "--secret", "k", "--url", "http://127.0.0.1:1"}, code: 1,
			message: "connection refused: check that `bookingledger serve` runs at http://127.0.0.1:1 (--url)"},
		{name: "send missing raw file", args: []string{"send", "calendly", "--raw", "/nonexistent/body.json", "--secret", "k"}, code: 2, message: "--raw"},
		{name: "history without booking", args: []string{"history"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "history wants one booking ID"},
		{name: "history with two bookings", args: []string{"history", "calendly-a", "calendly-b"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "history wants one booking ID"},
		{name: "history with a blank booking", args: []string{"history", "calendly a"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "contains white space"},
		{name: "history without database", args: []string{"history", "calendly-a"}, code: 2, message: "BOOKINGLEDGER_DATABASE_URL (or DATABASE_URL) is not set"},
		{name: "history with a bad event store", args: []string{"history", "calendly-a"}, env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_EVENT_STORE": "mysql"}, code: 2, message: "BOOKINGLEDGER_EVENT_STORE"},
		{name: "history with a bad JSON variable", args: []string{"history", "calendly-a"}, env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_JSON": "yes please"}, code: 2, message: `BOOKINGLEDGER_JSON="yes please": want true or false`},
		{name: "history unreachable", args: []string{"history", "calendly-a"}, env: map[string]string{"DATABASE_URL": dead}, code: 1, message: "database:", absent: "Run 'bookingledger help'"},
		{name: "history -h", args: []string{"history", "-h"}, code: 0},
		{name: "calendar without from", args: []string{"calendar", "--to", "2030-01-08T00:00:00Z"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "--from is required"},
		{name: "calendar without to", args: []string{"calendar", "--from", "2030-01-07T00:00:00Z"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "--to is required"},
		{name: "calendar bad time", args: []string{"calendar", "--from", "monday", "--to", "2030-01-08T00:00:00Z"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: `--from "monday" is not an RFC 3339 time`},
		{name: "calendar backwards", args: []string{"calendar", "--from", "2030-01-08T00:00:00Z", "--to", "2030-01-07T00:00:00Z"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "to must be after from"},
		{name: "calendar too long", args: []string{"calendar", "--from", "2030-01-01T00:00:00Z", "--to", "2031-06-01T00:00:00Z"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "366 days"},
		{name: "calendar stray argument", args: []string{"calendar", "today"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "calendar takes no arguments"},
		{name: "calendar window from the environment", args: []string{"calendar"}, env: map[string]string{"DATABASE_URL": dead,
			"BOOKINGLEDGER_CALENDAR_FROM": "2030-01-07T00:00:00Z", "BOOKINGLEDGER_CALENDAR_TO": "2030-01-08T00:00:00Z"}, code: 1, message: "database:"},
		{name: "reconcile without action", args: []string{"reconcile"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "reconcile wants an action"},
		{name: "reconcile unknown action", args: []string{"reconcile", "fix"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: `unknown action "fix"`},
		{name: "reconcile list with note", args: []string{"reconcile", "list", "--note", "x"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "--note applies to resolve only"},
		{name: "reconcile resolve without id", args: []string{"reconcile", "resolve", "--note", "x"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "wants one item id"},
		{name: "reconcile resolve bad id", args: []string{"reconcile", "resolve", "seven", "--note", "x"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: `item id "seven" is not a positive integer`},
		{name: "reconcile resolve without note", args: []string{"reconcile", "resolve", "7"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "--note is required"},
		{name: "reconcile resolve blank note", args: []string{"reconcile", "resolve", "7", "--note", "  "}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "--note is required"},
		{name: "reconcile resolve unreachable", args: []string{"reconcile", "resolve", "7", "--note", "x"}, env: map[string]string{"DATABASE_URL": dead}, code: 1, message: "database:"},
		{name: "rebuild unknown projection", args: []string{"rebuild", "calender"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: `unknown projection "calender" (have calendar, process, relay, or all)`},
		{name: "rebuild two projections", args: []string{"rebuild", "calendar", "calendar"}, env: map[string]string{"DATABASE_URL": dead}, code: 2, message: "at most one projection"},
		{name: "rebuild without database", args: []string{"rebuild"}, code: 2, message: "DATABASE_URL"},
		{name: "rebuild unreachable", args: []string{"rebuild", "--quiet"}, env: map[string]string{"DATABASE_URL": dead}, code: 1, message: "database:"},
		{name: "send to nothing", args: []string{"send", "calendly", "invitee.created", "--secret", "k", "--url", "http://127.0.0.1:1", "--timeout", "2s"}, code: 1, message: "post http://127.0.0.1:1/webhooks/calendly"},
		{name: "endpoints without action", args: []string{"endpoints"}, env: deadDB, code: 2, message: "endpoints wants an action"},
		{name: "endpoints unknown action", args: []string{"endpoints", "rename", "1"}, env: deadDB, code: 2, message: `endpoints: unknown action "rename"`},
		{name: "endpoints add without url", args: []string{"endpoints", "add"}, env: deadDB, code: 2, message: "endpoints add: --url is required"},
		{name: "endpoints add with an argument", args: []string{"endpoints", "add", "crm", "--url", "https://example.com/hook"}, env: deadDB, code: 2, message: `endpoints add takes flags only, got ["crm"]`},
		{name: "endpoints add bad types", args: []string{"endpoints", "add", "--url", "https://example.com/hook", "--types", "Booking.*"}, env: deadDB, code: 2, message: "endpoints add: --types:"},
		{name: "endpoints list with add's flag", args: []string{"endpoints", "list", "--url", "https://example.com/hook"}, env: deadDB, code: 2, message: "endpoints list: --url applies to add and update only"},
		{name: "endpoints disable zero", args: []string{"endpoints", "disable", "0"}, env: deadDB, code: 2, message: `endpoints disable: "0" is not an endpoint id`},
		{name: "endpoints add bad rate", args: []string{"endpoints", "add", "--url", "https://example.com/hook", "--rate", "fast"}, env: deadDB, code: 2, message: `endpoints add: --rate "fast": want a number of attempts per second`},
		{name: "endpoints update bad disable-after", args: []string{"endpoints", "update", "1", "--disable-after", "5d"}, env: deadDB, code: 2, message: `endpoints update: --disable-after "5d": want 0 (never) or a Go duration`},
		{name: "endpoints update too many breaker failures", args: []string{"endpoints", "update", "1", "--breaker-failures", "5000"}, env: deadDB, code: 2, message: "endpoints update: --breaker-failures 5000: at most 1000"},
		{name: "endpoints list with ordered", args: []string{"endpoints", "list", "--ordered"}, env: deadDB, code: 2, message: "endpoints list: --ordered applies to add and update only"},
		{name: "endpoints disable with send-missed", args: []string{"endpoints", "disable", "1", "--send-missed"}, env: deadDB, code: 2, message: "endpoints disable: --send-missed applies to enable only"},
		{name: "endpoints enable without id", args: []string{"endpoints", "enable"}, env: deadDB, code: 2, message: "endpoints enable wants one endpoint id"},
		{name: "endpoints remove two ids", args: []string{"endpoints", "remove", "1", "2"}, env: deadDB, code: 2, message: "endpoints remove wants one endpoint id"},
		{name: "endpoints list unreachable", args: []string{"endpoints", "list"}, env: deadDB, code: 1, message: "database:", absent: "Run 'bookingledger help'"},
		{name: "deliveries unknown state", args: []string{"deliveries", "--state", "lost"}, env: deadDB, code: 2, message: `deliveries: --state "lost": want pending, paused, succeeded or dead`},
		{name: "deliveries with an argument", args: []string{"deliveries", "dead"}, env: deadDB, code: 2, message: `deliveries takes flags only (or retry <id>), got ["dead"]`},
		{name: "deliveries negative endpoint", args: []string{"deliveries", "--endpoint", "-1"}, env: deadDB, code: 2, message: "must be at least 0"},
		{name: "deliveries zero limit", args: []string{"deliveries", "--limit", "0"}, env: deadDB, code: 2, message: "must be at least 1"},
		{name: "deliveries retry zero", args: []string{"deliveries", "retry", "0"}, env: deadDB, code: 2, message: `deliveries retry: delivery id "0" is not a positive integer`},
		{name: "deliveries retry with a listing flag", args: []string{"deliveries", "retry", "7", "--state", "dead"}, env: deadDB, code: 2, message: "deliveries retry: --state applies to the listing only"},
		{name: "deliveries retry two ids", args: []string{"deliveries", "retry", "1", "2"}, env: deadDB, code: 2, message: "deliveries retry wants one delivery id"},
		{name: "replay without endpoint", args: []string{"replay", "--from", "2027-03-15T00:00:00Z", "--to", "2027-03-16T00:00:00Z"}, env: deadDB, code: 2, message: "replay: --endpoint is required"},
		{name: "replay endpoint zero", args: []string{"replay", "--endpoint", "0", "--from", "2027-03-15T00:00:00Z", "--to", "2027-03-16T00:00:00Z"}, env: deadDB, code: 2, message: "replay: --endpoint is required"},
		{name: "replay without from", args: []string{"replay", "--endpoint", "1", "--to", "2027-03-16T00:00:00Z"}, env: deadDB, code: 2, message: "replay: --from is required"},
		{name: "replay bad to", args: []string{"replay", "--endpoint", "1", "--from", "2027-03-15T00:00:00Z", "--to", "2027-03-16"}, env: deadDB, code: 2, message: `replay: --to "2027-03-16" is not an RFC 3339 time`},
		{name: "replay empty window", args: []string{"replay", "--endpoint", "1", "--from", "2027-03-15T00:00:00Z", "--to", "2027-03-15T00:00:00Z"}, env: deadDB, code: 2, message: "replay: --from must be before --to"},
		{name: "replay bad types", args: []string{"replay", "--endpoint", "1", "--from", "2027-03-15T00:00:00Z", "--to", "2027-03-16T00:00:00Z", "--types", "Bad Type"}, env: deadDB, code: 2, message: "replay: --types:"},
		{name: "replay with an argument", args: []string{"replay", "now", "--endpoint", "1", "--from", "2027-03-15T00:00:00Z", "--to", "2027-03-16T00:00:00Z"}, env: deadDB, code: 2, message: `replay takes flags only, got ["now"]`},
		{name: "token without action", args: []string{"token"}, env: deadDB, code: 2, message: "token wants an action"},
		{name: "token create with an argument", args: []string{"token", "create", "ops", "--name", "ops", "--scope", "read"}, env: deadDB, code: 2, message: "token create takes no arguments"},
		{name: "token create long name", args: []string{"token", "create", "--name", strings.Repeat("n", 65), "--scope", "read"}, env: deadDB, code: 2, message: "token create: --name:"},
		{name: "token list with an argument", args: []string{"token", "list", "all"}, env: deadDB, code: 2, message: "token list takes no arguments"},
		{name: "token revoke with a create flag", args: []string{"token", "revoke", "ops", "--scope", "admin"}, env: deadDB, code: 2, message: "token revoke: --scope applies to create only"},
		{name: "token list with a create flag", args: []string{"token", "list", "--name", "ops"}, env: deadDB, code: 2, message: "token list: --name applies to create only"},
		{name: "token revoke two tokens", args: []string{"token", "revoke", "a", "b"}, env: deadDB, code: 2, message: "token revoke wants one token id or name"},
		{name: "receipts without action", args: []string{"receipts"}, env: deadDB, code: 2, message: "receipts wants an action"},
		{name: "receipts list with an argument", args: []string{"receipts", "list", "all"}, env: deadDB, code: 2, message: "receipts list takes no arguments"},
		{name: "receipts list limit above 1000", args: []string{"receipts", "list", "--limit", "1001"}, env: deadDB, code: 2, message: "receipts list: --limit is more than 1000"},
		{name: "receipts show zero", args: []string{"receipts", "show", "0"}, env: deadDB, code: 2, message: `receipts show: receipt id "0" is not a positive integer`},
		{name: "receipts show with a list flag", args: []string{"receipts", "show", "7", "--outcome", "accepted"}, env: deadDB, code: 2, message: "receipts show: --outcome applies to list only"},
		{name: "steps with an argument", args: []string{"steps", "done"}, env: deadDB, code: 2, message: `steps takes no arguments, got ["done"]`},
		{name: "zero drain timeout flag", args: []string{"serve", "--drain-timeout", "0s"}, env: deadDB, code: 2, message: "must be positive"},
		{name: "negative relay wait", args: []string{"serve"}, env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_RELAY_SCHEDULE": "0s,-5s"}, code: 2, message: `"-5s" is not a non-negative Go duration`},
		{name: "too many relay waits", args: []string{"serve"}, env: map[string]string{"DATABASE_URL": dead, "BOOKINGLEDGER_RELAY_SCHEDULE": strings.Repeat("1s,", 100) + "1s"}, code: 2, message: "want 1 to 100 waits"},
		{name: "resources without action", args: []string{"resources"}, env: deadDB, code: 2, message: "resources wants an action"},
		{name: "resources link without provider resource", args: []string{"resources", "link", "dr-smith"}, env: deadDB, code: 2, message: "resources link wants a name and at least one provider resource"},
		{name: "resources show two names", args: []string{"resources", "show", "dr-smith", "dr-jones"}, env: deadDB, code: 2, message: "resources show wants a name first"},
		{name: "resources show bad name", args: []string{"resources", "show", "Dr Smith"}, env: deadDB, code: 2, message: "resources show: "},
		{name: "resources list with an argument", args: []string{"resources", "list", "all"}, env: deadDB, code: 2, message: "resources list takes no arguments"},
		{name: "resources apply missing file", args: []string{"resources", "apply", "/nonexistent/resources.json"}, env: deadDB, code: 2, message: "/nonexistent/resources.json"},
		{name: "erase with an argument", args: []string{"erase", "calendly-a"}, env: deadDB, code: 2, message: "erase takes no arguments"},
		{name: "erase booking and email", args: []string{"erase", "--booking", "calendly-a", "--email", "a@example.com"}, env: deadDB, code: 2, message: "exactly one of --booking and --email"},
		{name: "keys two actions", args: []string{"keys", "generate", "rewrap"}, env: deadDB, code: 2, message: "keys wants one action"},
		{name: "keys generate bad id", args: []string{"keys", "generate", "--id", "k:1"}, code: 2, message: "--id: "},
		{name: "calendar limit above the page", args: []string{"calendar", "--from", "2030-01-07T00:00:00Z", "--to", "2030-01-08T00:00:00Z", "--limit", "10001"}, env: deadDB, code: 2, message: "calendar: --limit 10001: at most 10000"},
		{name: "reconcile list with an argument", args: []string{"reconcile", "list", "7"}, env: deadDB, code: 2, message: "reconcile list takes no arguments"},
		{name: "reconcile list with resolve's action", args: []string{"reconcile", "list", "--action", "retry"}, env: deadDB, code: 2, message: "reconcile list: --action applies to resolve only"},
		{name: "reconcile list with resolve's by", args: []string{"reconcile", "list", "--by", "ops"}, env: deadDB, code: 2, message: "reconcile list: --by applies to resolve only"},
		{name: "resources list with by", args: []string{"resources", "list", "--by", "ops"}, env: deadDB, code: 2, message: "resources list: --by applies to link, unlink and apply only"},
		{name: "resources show with by", args: []string{"resources", "show", "dr-smith", "--by", "ops"}, env: deadDB, code: 2, message: "resources show: --by applies to link, unlink and apply only"},
		{name: "reconcile resolve long note", args: []string{"reconcile", "resolve", "7", "--note", strings.Repeat("n", 4001)}, env: deadDB, code: 2, message: "--note is longer than 4000 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			err := run(ctx, tc.args, envOf(tc.env), &stdout, &stderr)
			code := exitCode(err, &stderr)
			assert.Equal(t, tc.code, code, "error: %v", err)
			out := stderr.String()
			if tc.code == 0 {
				out = stdout.String()
			}
			assert.Contains(t, out, tc.message)
			if tc.absent != "" {
				assert.NotContains(t, stderr.String(), tc.absent)
			}
		})
	}
}
