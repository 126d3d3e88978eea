package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
)

// serve checks every template at start: a broken one stops it with exit code 2 and a message naming
// the variable, the file and the error, before it touches the database; a good directory gets as far
// as the database.
func TestServeRefusesToStartWithABrokenTemplate(t *testing.T) {
	const dead = "postgres://bl@127.0.0.1:1/nowhere?connect_timeout=1"
	serve := func(t *testing.T, args []string, env map[string]string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var stdout, stderr bytes.Buffer
		err := run(ctx, append([]string{"serve"}, args...), envOf(env), &stdout, &stderr)
		return exitCode(err, &stderr), stderr.String()
	}
	dir := t.TempDir()
	broken := filepath.Join(dir, "confirmation.html")
	require.NoError(t, os.WriteFile(broken, []byte("<p>{{.Nmae}}</p>\n"), 0o600))
	env := map[string]string{"BOOKINGLEDGER_DATABASE_URL": dead, "BOOKINGLEDGER_MASTER_KEY": testMasterKey, envTemplates: dir}
	code, out := serve(t, nil, env)
	assert.Equal(t, 2, code)
	assert.Contains(t, out, "BOOKINGLEDGER_TEMPLATES / --templates: template "+broken+`: template: confirmation.html:1:5: executing "confirmation.html" at <.Nmae>: can't evaluate field Nmae in type render.Data`)

	require.NoError(t, os.WriteFile(broken, []byte("<p>{{.Name}</p>\n"), 0o600))
	code, out = serve(t, nil, env)
	assert.Equal(t, 2, code)
	assert.Contains(t, out, "template "+broken+": template: confirmation.html:1:")

	code, out = serve(t, []string{"--templates", filepath.Join(dir, "nowhere")}, env)
	assert.Equal(t, 2, code, "the flag overrides the variable")
	assert.Contains(t, out, "BOOKINGLEDGER_TEMPLATES / --templates: templates directory: open "+filepath.Join(dir, "nowhere"))

	require.NoError(t, os.WriteFile(broken, []byte("<p>{{.Name}}</p>\n"), 0o600))
	code, out = serve(t, nil, env)
	assert.Equal(t, 1, code, "good templates: serve goes on to the database")
	assert.Contains(t, out, "migrate on start")
}

// post sends a sample delivery of provider's event for params, signed with secret, and wants 200.
func postSample(t *testing.T, base, provider, event, secret string, p sample.Params) {
	t.Helper()
	d, err := sample.Build(provider, event, secret, p, time.Now())
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/"+provider, bytes.NewReader(d.Body))
	require.NoError(t, err)
	req.Header = d.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// End to end: the invitee's zone in a Calendly and a Cal.com payload reaches their emails (Tokyo time
// for the Tokyo invitee, New York time for the other), through serve with an operator's templates
// directory: its subject replaces the default, the rest stays the default; the host calendar event
// gets the default summary and description.
func TestServeWritesEmailsInTheInviteesZoneWithTheOperatorsTemplates(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	w := newStepsWorld(t, nil, nil)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "confirmation.subject.txt"), []byte("{{.Name}}, see you {{.When}}\n"), 0o600))
	w.vars[envTemplates] = dir
	srv := startServe(t, w.env())
	start := time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)

	postSample(t, srv.Base, "calendly", "invitee.created", demoCalendlyKey, sample.Params{Booking: "tokyo", Host: "host-t", Start: start, TimeZone: "Asia/Tokyo"})
	postSample(t, srv.Base, "calcom", "BOOKING_CREATED", demoCalcomSecret, sample.Params{Booking: "newyork", Host: "host-n", Start: start, TimeZone: "America/New_York"})
	w.waitSteps(t, "calendly-tokyo", "host_calendar.create=done", "invitee_email.confirmation=done")
	w.waitSteps(t, "calcom-newyork", "host_calendar.create=done", "invitee_email.confirmation=done")

	subjects := map[string]string{}
	for _, m := range w.smtp.Delivered() {
		subjects[m.Subject] = string(m.Data)
	}
	const tokyo, newYork = "Mon 7 Jan 2030 18:00-18:30 JST (Asia/Tokyo)", "Mon 7 Jan 2030 04:00-04:30 EST (America/New_York)"
	require.Contains(t, subjects, "Ada Lovelace, see you "+tokyo, "the operator's subject, in the invitee's zone: %v", subjects)
	require.Contains(t, subjects, "Ada Lovelace, see you "+newYork, "%v", subjects)
	assert.Contains(t, subjects["Ada Lovelace, see you "+tokyo], "\r\nHello Ada Lovelace,\r\n\r\nyour booking on "+tokyo+" is confirmed.\r\n\r\nReference: calendly-tokyo\r\n",
		"the default text part")
	assert.Contains(t, subjects["Ada Lovelace, see you "+tokyo], "Content-Type: text/html; charset=utf-8")

	var zone string
	require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT time_zone FROM contacts WHERE booking = 'calendly-tokyo'`).Scan(&zone))
	assert.Equal(t, "Asia/Tokyo", zone)
	summaries := map[string]string{}
	for _, o := range w.dav.Store.Objects() {
		summaries[o.Summary] = o.Description
	}
	assert.Equal(t, map[string]string{"Booking calendly-tokyo": "Reference: calendly-tokyo", "Booking calcom-newyork": "Reference: calcom-newyork"}, summaries)
}
