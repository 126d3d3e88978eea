package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

// person is what the samples say about an invitee, replaced by markers of one test person.
type person struct {
	booking, name, email, phone, reason string
}

func (p person) markers() []string { return []string{p.name, p.email, p.phone, p.reason} }

// forms are the byte forms a text can take in a dump: as is, JSON-escaped, base64, and the hex of a
// bytea column in pg_dump's plain output.
func forms(s string) []string {
	return []string{s, jsonText(s), base64.StdEncoding.EncodeToString([]byte(s)),
		base64.RawStdEncoding.EncodeToString([]byte(s)), strings.TrimSuffix(strings.TrimSuffix(base64.StdEncoding.EncodeToString([]byte(s)), "="), "="),
		hexString(s)}
}

// jsonText is s as it appears inside a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

func hexString(s string) string {
	const digits = "0123456789abcdef"
	var b strings.Builder
	for i := range len(s) {
		b.WriteByte(digits[s[i]>>4])
		b.WriteByte(digits[s[i]&15])
	}
	return b.String()
}

// sendPerson sends Calendly's created and canceled samples of p, with the samples' invitee, phone and
// reason replaced by p's.
func sendPerson(t *testing.T, env func(string) string, base string, p person) {
	t.Helper()
	for _, event := range []string{"invitee.created", "invitee.canceled"} {
		body, err := sample.Body("calendly", event, sample.Params{Booking: p.booking, Start: time.Date(2030, 2, 1, 10, 0, 0, 0, time.UTC)})
		require.NoError(t, err)
		// Inside JSON strings: escaped as the provider's encoder would.
		for from, to := range map[string]string{"Ada Lovelace": jsonText(p.name), "ada.lovelace@example.com": jsonText(p.email),
			"Schedule conflict": jsonText(p.reason), `"first_name":null`: `"first_name":null,"text_reminder_number":"` + jsonText(p.phone) + `"`} {
			body = bytes.ReplaceAll(body, []byte(from), []byte(to))
		}
		if event == "invitee.canceled" {
			require.Contains(t, string(body), jsonText(p.reason), "the cancel carries the reason")
		}
		require.Contains(t, string(body), p.phone, "the body carries the phone number")
		file := filepath.Join(t.TempDir(), event+".json")
		require.NoError(t, os.WriteFile(file, body, 0o600))
		send(t, env, base, "calendly", "--raw", file)
	}
}

// TestEraseByEmailLeavesNoTraceInTheDump is issue #16's end-to-end test: two people book and cancel
// through serve; `erase --email` of one of them leaves no byte of their address, name, phone number or
// cancel reason in a pg_dump of the whole database, in any form, while the other's data is intact;
// history still renders, saying when; a rebuild equals the incremental read model.
func TestEraseByEmailLeavesNoTraceInTheDump(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	pgDump := pgBin(t, "pg_dump")
	dbURL := servetest.NewDatabaseURL(t)
	env := envOf(map[string]string{
		envDatabaseURL:                        dbURL,
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		"BOOKINGLEDGER_DRAIN_TIMEOUT":         "5s",
		"BOOKINGLEDGER_MASTER_KEY":            testMasterKey,
	})
	gone := person{booking: "pd-zoe", name: "Zoë Quuxmarker", email: "zoe.quux@example.org", phone: "+44 7700 900456", reason: `Zoë's "dentist" <appointment>`}
	kept := person{booking: "pd-bob", name: "Bob Keepmarker", email: "bob.keep@example.org", phone: "+44 7700 900789", reason: "Bob's kept reason"}

	srv := startServe(t, env)
	sendPerson(t, env, srv.Base, gone)
	sendPerson(t, env, srv.Base, kept)
	waitForCalendar(t, srv.AdminToken(t), srv.Admin, "2030-02-01T00:00:00Z", "2030-02-02T00:00:00Z",
		map[string]string{"calendly-pd-zoe": "canceled", "calendly-pd-bob": "canceled"})

	// The admin API: a read token may not erase; an admin token's dry run lists and keeps.
	status, body := httpDo(t, srv.AdminToken(t), "POST", srv.Admin+"/api/admin/erasures", `{"email":"`+gone.email+`","dry_run":true}`)
	require.Equal(t, 200, status, body)
	assert.Contains(t, body, `"bookings":["calendly-pd-zoe"]`)
	assert.NotContains(t, body, gone.email, "the answer never echoes the address")
	status, body = httpDo(t, srv.AdminToken(t), "POST", srv.Admin+"/api/admin/erasures", `{"booking":"calendly-pd-zoe","email":"x@y"}`)
	assert.Equal(t, 400, status, body)

	out, stderr, code := cli(t, env, "erase", "--email", gone.email, "--dry-run")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "would erase: calendly-pd-zoe")
	out, stderr, code = cli(t, env, "erase", "--email", gone.email, "--by", "dpo")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "erased: calendly-pd-zoe")
	assert.Contains(t, out, "recorded as erasure 1 (subject.erased) by dpo")
	out, _, code = cli(t, env, "erase", "--email", gone.email)
	require.Equal(t, 0, code)
	assert.Contains(t, out, "nothing to erase", "erasing again is safe")

	status, body = httpDo(t, srv.AdminToken(t), "GET", srv.Admin+"/api/admin/erasures", "")
	require.Equal(t, 200, status, body)
	assert.Contains(t, body, `"erased_by":"dpo"`)
	srv.Stop(t)

	dump, err := exec.Command(pgDump, "--format=plain", "--no-owner", dbURL).CombinedOutput()
	require.NoError(t, err, "pg_dump: %s", dump)
	for _, m := range gone.markers() {
		for _, f := range forms(m) {
			assert.NotContains(t, string(dump), f, "the dump still holds %q (as %q)", m, f)
		}
	}
	for _, m := range []string{kept.name, kept.email, kept.reason} {
		assert.Contains(t, string(dump), m, "the other person's %q is intact (contacts, kept reasons)", m)
	}
	assert.NotContains(t, string(dump), kept.phone, "the other person's body is there, sealed")

	// History still renders: times, types, outcomes, and when the reason went.
	hist, stderr, code := cli(t, env, "history", "calendly-pd-zoe")
	require.Equal(t, 0, code, stderr)
	today := time.Now().UTC().Format(time.DateOnly)
	assert.Contains(t, hist, "canceled by invitee: [erased on "+today+"]")
	assert.Contains(t, hist, "booking.scheduled.v1")
	hist, _, _ = cli(t, env, "history", "calendly-pd-bob")
	assert.Contains(t, hist, kept.reason)

	// The other person's receipt body opens for an authorised reader (receipts 3 and 4 are theirs);
	// the erased one says when it went; without the master key a body stays sealed.
	out, stderr, code = cli(t, env, "receipts", "show", "1")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "body: [erased on "+today+"]")
	out, stderr, code = cli(t, env, "receipts", "show", "3")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, kept.phone)
	noKey := func(k string) string {
		if k == "BOOKINGLEDGER_MASTER_KEY" {
			return ""
		}
		return env(k)
	}
	out, stderr, code = cli(t, noKey, "receipts", "show", "3")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "body: sealed")
	assert.NotContains(t, out, kept.phone)
	wrongKey := func(k string) string {
		if k == "BOOKINGLEDGER_MASTER_KEY" {
			return "test:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
		}
		return env(k)
	}
	_, stderr, code = cli(t, wrongKey, "receipts", "show", "3")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "does not open the data keys")
	_, stderr, code = cli(t, wrongKey, "serve")
	assert.Equal(t, 1, code, "serve with the wrong master key does not start")
	assert.Contains(t, stderr, "master key check")

	// Rebuild equals incremental.
	bookings := []string{"calendly-pd-zoe", "calendly-pd-bob"}
	before := readSideSnapshot(t, env, bookings)
	_, stderr, code = cli(t, env, "rebuild", "--quiet")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, before, readSideSnapshot(t, env, bookings))
}
