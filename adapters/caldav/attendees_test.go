package caldav_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/emersion/go-ical"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/caldav"
	"bookingledger/adapters/caldav/davtest"
	"bookingledger/adapters/process"
)

// A seated booking's event round-trips through real Radicale and Xandikos with its attendees: one
// ATTENDEE each (CN, PARTSTAT=ACCEPTED, SCHEDULE-AGENT=CLIENT, no ORGANIZER: no server schedules),
// and an update that drops one leaves exactly the others.
func TestRealServersKeepTheAttendeeList(t *testing.T) {
	for _, name := range davtest.Servers {
		t.Run(name, func(t *testing.T) {
			tpl, user, pass := davtest.Start(t, name)
			tg, err := caldav.New(caldav.Config{URLTemplate: tpl, Username: user, Password: pass, AllowPrivate: true, Timeout: 10 * time.Second})
			require.NoError(t, err)
			ctx := context.Background()
			const resource = "https://api.cal.com/users/seats-host"
			_, _, err = tg.Setup(ctx, resource)
			require.NoError(t, err)
			key := uuid.New()
			href, err := tg.Href(resource, key)
			require.NoError(t, err)
			start := time.Date(2031, 8, 1, 9, 0, 0, 0, time.UTC)
			ev := process.Event{UID: key.String(), Summary: "Seated booking", Start: start, End: start.Add(time.Hour), Seated: true,
				Attendees: []process.Attendee{{Name: "Ada", Email: "ada@example.com"}, {Name: `Cy "the third", Jr.`, Email: "cy@example.com"}}}
			etag, err := tg.Create(ctx, href, ev)
			require.NoError(t, err)
			assert.Equal(t, []string{"Ada <mailto:ada@example.com>", "Cy the third, Jr. <mailto:cy@example.com>"}, readAttendees(t, href, user, pass))

			ev.Attendees, ev.Sequence = ev.Attendees[1:], 1
			if etag == "" {
				got, err := tg.Get(ctx, href)
				require.NoError(t, err)
				etag = got.ETag
			}
			_, err = tg.Update(ctx, href, etag, ev)
			require.NoError(t, err)
			assert.Equal(t, []string{"Cy the third, Jr. <mailto:cy@example.com>"}, readAttendees(t, href, user, pass), "exactly the attendees left")

			ev.Attendees = nil
			got, err := tg.Get(ctx, href)
			require.NoError(t, err)
			_, err = tg.Update(ctx, href, got.ETag, ev)
			require.NoError(t, err)
			assert.Empty(t, readAttendees(t, href, user, pass))
		})
	}
}

// readAttendees GETs the object at href and returns its ATTENDEE properties as "CN <value>", after
// checking that each tells the server not to schedule.
func readAttendees(t *testing.T, href, user, pass string) []string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, href, nil)
	require.NoError(t, err)
	req.SetBasicAuth(user, pass)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	cal, err := ical.NewDecoder(resp.Body).Decode()
	require.NoError(t, err)
	var out []string
	for _, e := range cal.Events() {
		assert.Empty(t, e.Props.Values(ical.PropOrganizer), "no ORGANIZER: not a scheduling object")
		for _, p := range e.Props.Values(ical.PropAttendee) {
			assert.Equal(t, "CLIENT", p.Params.Get("SCHEDULE-AGENT"), "the server must not schedule")
			assert.Equal(t, "ACCEPTED", p.Params.Get(ical.ParamParticipationStatus))
			out = append(out, p.Params.Get(ical.ParamCommonName)+" <"+p.Value+">")
		}
	}
	slices.Sort(out)
	return out
}
