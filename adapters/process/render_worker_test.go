package process_test

import (
	"bytes"
	"context"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	netmail "net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/caldav"
	"bookingledger/adapters/caldav/caldavsink"
	"bookingledger/adapters/email"
	"bookingledger/adapters/email/smtpsink"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/adapters/process"
	"bookingledger/adapters/render"
)

// newRenderWorld is newMailWorld with a CalDAV server too, the worker configured with templates
// (nil: the defaults) and resource zones.
func newRenderWorld(t *testing.T, templates *render.Set, zones map[string]string) *workerWorld {
	t.Helper()
	w := &workerWorld{pool: pgtest.NewDatabase(t)}
	var err error
	w.smtp, err = smtpsink.Start(smtpsink.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.smtp.Close() })
	w.sink, err = caldavsink.Start(caldavsink.Config{Fault: func(*http.Request) int { return 0 }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.sink.Close() })
	w.target, err = caldav.New(caldav.Config{URLTemplate: w.sink.URL() + "/dav/{resource}/bookings/", AllowPrivate: true})
	require.NoError(t, err)
	mailer, err := email.New(email.Config{Addr: w.smtp.Addr(), From: "bookings@test.localhost", AllowPrivate: true})
	require.NoError(t, err)
	w.worker, err = process.NewWorker(process.WorkerConfig{Pool: w.pool, Steps: stepstore.NewStore(w.pool, nil), Slots: readmodel.NewStepReader(w.pool), Contacts: postgres.NewContacts(w.pool), Mailer: mailer, Calendar: w.target, CallTimeout: 5 * time.Second,
		Templates: templates, ResourceZone: func(r string) string { return zones[r] }})
	require.NoError(t, err)
	return w
}

// sendTo runs an email step of kind for booking b at slot, to a contact in zone (the contacts row as
// the ingress saves it), and returns the message the SMTP server received.
func (w *workerWorld) sendTo(t *testing.T, b string, kind process.Kind, slot [2]time.Time, zone string) smtpsink.Message {
	t.Helper()
	w.calendarRow(t, b, "active", slot)
	_, err := w.pool.Exec(context.Background(), `INSERT INTO contacts (booking, email, name, time_zone) VALUES ($1, $2, 'Ada', $3)`, b, b+"@invitee.test", zone)
	require.NoError(t, err)
	id, _ := w.insert(t, process.Step{Kind: kind, Booking: b, State: process.StatePending, Start: slot[0], End: slot[1]})
	state, note, err := w.work(t, id)
	require.NoError(t, err)
	require.Equal(t, "done", state, note)
	for _, m := range w.smtp.Delivered() {
		if m.To[0] == b+"@invitee.test" {
			return m
		}
	}
	t.Fatalf("no message to %s", b)
	return smtpsink.Message{}
}

// htmlPart is the decoded text/html part of a multipart/alternative message.
func htmlPart(t *testing.T, m smtpsink.Message) string {
	t.Helper()
	msg, err := netmail.ReadMessage(bytes.NewReader(m.Data))
	require.NoError(t, err)
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	require.NoError(t, err)
	r := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := r.NextPart()
		require.NoError(t, err, "no text/html part")
		if strings.HasPrefix(p.Header.Get("Content-Type"), "text/html") {
			b, err := io.ReadAll(p)
			require.NoError(t, err)
			return string(b)
		}
	}
}

// A booking whose invitee is in Asia/Tokyo reads in Tokyo time, the zone named, in the subject and in
// both parts of the message; an invitee without a zone reads in the resource's (host-1: Europe/Berlin
// here), and one on a resource without a zone in UTC, as before.
func TestEmailIsInTheInviteesTimeZone(t *testing.T) {
	t.Parallel()
	w := newRenderWorld(t, nil, map[string]string{"host-1": "Europe/Berlin"})
	slot := [2]time.Time{time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC), time.Date(2030, 1, 7, 9, 30, 0, 0, time.UTC)}

	m := w.sendTo(t, "calendly-tokyo", process.EmailConfirmation, slot, "Asia/Tokyo")
	const tokyo = "Mon 7 Jan 2030 18:00-18:30 JST (Asia/Tokyo)"
	assert.Equal(t, "Booking confirmed: "+tokyo, m.Subject)
	data := string(m.Data)
	assert.Contains(t, data, "Content-Type: multipart/alternative;")
	assert.Contains(t, data, "\r\nHello Ada,\r\n\r\nyour booking on "+tokyo+" is confirmed.\r\n\r\nReference: calendly-tokyo\r\n")
	assert.Contains(t, htmlPart(t, m), "<strong>"+tokyo+"</strong>")

	m = w.sendTo(t, "calendly-berlin", process.EmailRescheduled, slot, "")
	assert.Equal(t, "Booking rescheduled: Mon 7 Jan 2030 10:00-10:30 CET (Europe/Berlin)", m.Subject, "the resource's zone")

	utc := newRenderWorld(t, nil, nil)
	m = utc.sendTo(t, "calendly-utc", process.EmailConfirmation, slot, "")
	assert.Equal(t, "Booking confirmed: Mon 7 Jan 2030 09:00-09:30 UTC", m.Subject)
}

// The worker writes with the templates it is given: an operator's subject, HTML part and calendar
// summary and description replace the defaults; what was not overridden stays the default.
func TestWorkerUsesOverrideTemplates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, text := range map[string]string{
		"confirmation.subject.txt": `Your visit on {{.Start.Format "Mon 2 Jan 15:04"}} ({{.Zone}})`,
		"confirmation.html":        `<p>Dear {{.Name}}, see you {{.When}}.</p>`,
		"calendar.summary.txt":     `Visit {{.Booking}}`,
		"calendar.description.txt": `{{.When}} on {{.Resource}}`,
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600))
	}
	set, err := render.Load(dir)
	require.NoError(t, err)
	w := newRenderWorld(t, set, map[string]string{"host-1": "Asia/Tokyo"})
	slot := [2]time.Time{time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC), time.Date(2030, 1, 7, 9, 30, 0, 0, time.UTC)}

	m := w.sendTo(t, "calendly-own", process.EmailConfirmation, slot, "Europe/London")
	assert.Equal(t, "Your visit on Mon 7 Jan 09:00 (Europe/London)", m.Subject)
	assert.Equal(t, "<p>Dear Ada, see you Mon 7 Jan 2030 09:00-09:30 GMT (Europe/London).</p>", htmlPart(t, m))
	assert.Contains(t, string(m.Data), "\r\nHello Ada,\r\n", "the text part stays the default")

	id := w.step(t, "calendly-own-cal", slot, slot[0], slot[1])
	state, note, err := w.work(t, id)
	require.NoError(t, err)
	require.Equal(t, "done", state, note)
	objects := w.sink.Store.Objects()
	require.Len(t, objects, 1)
	assert.Equal(t, "Visit calendly-own-cal", objects[0].Summary)
	assert.Equal(t, "Mon 7 Jan 2030 18:00-18:30 JST (Asia/Tokyo) on host-1", objects[0].Description, "the calendar's times are the resource's")
	assert.False(t, strings.Contains(string(objects[0].Data), "Ada"), "no personal data in the host's calendar")
}
