package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestExitCodesAndMessages(t *testing.T) {
	const dead = "postgres://bl@127.0.0.1:1/nowhere?connect_timeout=1"
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
		{name: "unparsable database URL", args: []string{"serve"}, env: map[string]string{"BOOKINGLEDGER_DATABASE_URL": "postgres://u:secretpw@host:notaport/db"}, code: 2, message: "BOOKINGLEDGER_DATABASE_URL: not a valid", absent: "secretpw"},
		{name: "unreachable database", args: []string{"serve"}, env: map[string]string{"BOOKINGLEDGER_DATABASE_URL": dead}, code: 1, message: "migrate on start"},
		{name: "migrate without database", args: []string{"migrate"}, code: 2, message: "DATABASE_URL"},
		{name: "migrate unreachable", args: []string{"migrate"}, env: map[string]string{"DATABASE_URL": dead}, code: 1, message: "migrate:"},
		{name: "send without arguments", args: []string{"send"}, code: 2, message: "send wants <provider> <event>"},
		{name: "send unknown provider", args: []string{"send", "zoom", "x"}, code: 2, message: `unknown provider "zoom"`},
		{name: "send unknown event", args: []string{"send", "calendly", "invitee.exploded", "--secret", "k"}, code: 2, message: "invitee.exploded"},
		{name: "send without secret", args: []string{"send", "calendly", "invitee.created"}, code: 2, message: "BOOKINGLEDGER_CALENDLY_SIGNING_KEYS is not set"},
		{name: "send bad start", args: []string{"send", "calendly", "invitee.created", "--secret", "k", "--start", "tomorrow"}, code: 2, message: "--start"},
		{name: "send bad repeat", args: []string{"send", "calendly", "invitee.created", "--secret", "k", "--repeat", "0"}, code: 2, message: "must be at least 1"},
		{name: "send missing raw file", args: []string{"send", "calendly", "--raw", "/nonexistent/body.json", "--secret", "k"}, code: 2, message: "--raw"},
		{name: "send to nothing", args: []string{"send", "calendly", "invitee.created", "--secret", "k", "--url", "http://127.0.0.1:1", "--timeout", "2s"}, code: 1, message: "post http://127.0.0.1:1/webhooks/calendly"},
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
