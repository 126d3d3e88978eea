package main

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/caldav"
	"bookingledger/adapters/caldav/davtest"
	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/process"
)

// Against real Radicale and Xandikos through serve: the host's collection is missing, so the create
// fails after one PUT with one item naming the collection's URL (no retry loop); `steps setup`
// creates it and `reconcile resolve --action retry` runs the step again, done; a reschedule moves
// the object in place; a cancel deletes it.
func TestStepsAgainstRealCalDAVServers(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	for _, name := range davtest.Servers {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // each server has its own world: database, sinks and serve
			tpl, user, pass := davtest.Start(t, name)
			w := newStepsWorld(t, nil, nil)
			w.vars[envCalDAVURLTemplate] = tpl
			w.vars[envCalDAVUsername], w.vars[envCalDAVPassword] = user, pass
			env := w.env()
			srv := startServe(t, env)
			start := time.Date(2031, 10, 1, 9, 0, 0, 0, time.UTC)
			send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "rd1", "--host", "dr-real", "--start", start.Format(time.RFC3339))
			w.waitSteps(t, "calendly-rd1", "host_calendar.create=failed", "invitee_email.confirmation=done")

			target, err := caldav.New(caldav.Config{URLTemplate: tpl, Username: user, Password: pass, AllowPrivate: true})
			require.NoError(t, err)
			const resource = "https://api.calendly.com/users/dr-real"
			coll := target.CollectionURL(resource)
			var attempts int
			var itemID int64
			var reason string
			require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT s.attempts, i.id, i.reason FROM process_steps s
JOIN reconciliation_items i ON i.subject = 'step ' || s.key AND i.closed_at IS NULL WHERE s.kind = 'host_calendar.create'`).Scan(&attempts, &itemID, &reason))
			assert.Equal(t, 1, attempts, "no retry loop")
			assert.Contains(t, reason, "calendar collection missing at "+coll)

			out, errOut, code := cli(t, env, "steps", "setup")
			require.Equal(t, 0, code, errOut)
			assert.Contains(t, out, "created  "+resource+"  "+coll)
			_, errOut, code = cli(t, env, "reconcile", "resolve", strconv.FormatInt(itemID, 10), "--note", "collection created", "--action", "retry", "--by", "test")
			require.Equal(t, 0, code, errOut)
			w.waitSteps(t, "calendly-rd1", "host_calendar.create=done", "invitee_email.confirmation=done")
			var href string
			require.NoError(t, w.db(t).QueryRow(context.Background(), `SELECT target_href FROM process_steps WHERE kind = 'host_calendar.create'`).Scan(&href))
			got, err := target.Get(context.Background(), href)
			require.NoError(t, err)
			assert.True(t, got.Start.Equal(start))

			to := start.Add(48 * time.Hour)
			send(t, env, srv.Base, "calendly", "invitee.rescheduled", "--booking", "rd1", "--host", "dr-real", "--start", start.Format(time.RFC3339), "--reschedule-to", to.Format(time.RFC3339))
			want := "host_calendar.create=done host_calendar.update=done invitee_email.confirmation=done invitee_email.rescheduled=done"
			waitFor(t, 60*time.Second, "reschedule", func() (bool, string) {
				got := w.stepStates(t, "calendly-rd1")
				sort.Strings(got)
				return strings.Join(got, " ") == want, strings.Join(got, " ")
			})
			got, err = target.Get(context.Background(), href)
			require.NoError(t, err, "the same object, moved in place")
			assert.True(t, got.Start.Equal(to))

			send(t, env, srv.Base, "calendly", "invitee.canceled", "--booking", sample.CalendlyRescheduledInvitee("rd1"), "--host", "dr-real", "--start", to.Format(time.RFC3339))
			waitFor(t, 60*time.Second, "cancel", func() (bool, string) {
				got := w.stepStates(t, "calendly-rd1")
				return strings.Contains(strings.Join(got, " "), "host_calendar.delete=done"), strings.Join(got, " ")
			})
			_, err = target.Get(context.Background(), href)
			require.ErrorIs(t, err, process.ErrNotFound)
		})
	}
}
