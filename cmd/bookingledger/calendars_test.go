package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/gcal/gcalfake"
	"bookingledger/adapters/msgraph/msgraphfake"
)

// Each host resource's calendar steps go to the target the calendars file names for it — by the
// provider's identifier or by the canonical name it is linked to — and the others to the default
// (CalDAV): a create and a cancel land on Google, on Microsoft 365 and on CalDAV, one event each.
func TestCalendarStepsGoToEachResourcesTarget(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	w := newStepsWorld(t, nil, nil)
	g := gcalfake.Start()
	t.Cleanup(g.Close)
	m := msgraphfake.Start()
	t.Cleanup(m.Close)
	w.vars[envCalendarsFile] = writeFile(t, "calendars.json", `{"default": "caldav", "resources": {
  "https://api.calendly.com/users/g-host": {"target": "google", "calendar": "primary"},
  "dr-jones": {"target": "microsoft", "user": "jones@clinic.example"}}}`)
	w.vars[envResourcesFile] = writeFile(t, "resources.json", `{"resources": {"dr-jones": ["https://api.calendly.com/users/m-host"]}}`)
	w.vars[envGoogleEndpoint] = g.Endpoint()
	w.vars[envMicrosoftEndpoint] = m.Endpoint()
	env := w.env()
	srv := startServe(t, env)

	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "g1", "--host", "g-host", "--repeat", "3")
	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "m1", "--host", "m-host", "--repeat", "3")
	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "d1", "--host", "d-host")
	for _, b := range []string{"calendly-g1", "calendly-m1", "calendly-d1"} {
		w.waitSteps(t, b, "host_calendar.create=done", "invitee_email.confirmation=done")
	}
	require.Len(t, g.Events("primary"), 1)
	assert.Equal(t, "confirmed", g.Events("primary")[0].Status)
	require.Len(t, m.Events(), 1)
	require.Len(t, w.dav.Store.Objects(), 1)

	send(t, env, srv.Base, "calendly", "invitee.canceled", "--booking", "g1", "--host", "g-host")
	send(t, env, srv.Base, "calendly", "invitee.canceled", "--booking", "m1", "--host", "m-host")
	for _, b := range []string{"calendly-g1", "calendly-m1"} {
		w.waitSteps(t, b, "host_calendar.create=done", "invitee_email.confirmation=done", "host_calendar.delete=done", "invitee_email.cancellation=done")
	}
	assert.Equal(t, "cancelled", g.Events("primary")[0].Status)
	assert.Empty(t, m.Events())
	assert.Equal(t, 1, g.Inserts())
	assert.Equal(t, 1, m.Calls("POST"))
}

// A resource the calendars file gives no calendar (default none) gets no event: its create is skipped
// with the reason, nothing is called and no item is opened; the confirmation email still goes out.
func TestCalendarStepsOfAResourceWithoutTargetAreSkipped(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	w := newStepsWorld(t, nil, nil)
	w.vars[envCalendarsFile] = writeFile(t, "calendars.json", `{"default": "none", "resources": {"dr-x": {"target": "caldav"}}}`)
	env := w.env()
	srv := startServe(t, env)
	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "n1", "--host", "nobody")
	w.waitSteps(t, "calendly-n1", "host_calendar.create=skipped", "invitee_email.confirmation=done")
	var note string
	var items int
	require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT note, (SELECT count(*) FROM reconciliation_items WHERE kind = 'step')
FROM process_steps WHERE kind = 'host_calendar.create'`).Scan(&note, &items))
	assert.Contains(t, note, "no calendar target configured for this resource: https://api.calendly.com/users/nobody")
	assert.Zero(t, items)
	assert.Empty(t, w.dav.Store.Objects())
}
