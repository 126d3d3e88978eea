package main

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// send calendly invitee.rescheduled sends Calendly's pair, in either order, and Cal.com's
// BOOKING_RESCHEDULED with --reschedule-to: each booking's thread ends with its calendar object moved
// in place (one object, at the new slot) and one rescheduled email.
func TestSendReschedulesAsTheProvidersDo(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	w := newStepsWorld(t, nil, nil)
	env := w.env()
	srv := startServe(t, env)
	old := time.Date(2031, 9, 1, 9, 0, 0, 0, time.UTC)
	to := old.Add(26 * time.Hour)
	sortedStates := func(thread string) string {
		got := w.stepStates(t, thread)
		sort.Strings(got)
		return strings.Join(got, " ")
	}
	want := "host_calendar.create=done host_calendar.update=done invitee_email.confirmation=done invitee_email.rescheduled=done"
	cases := []struct{ thread, provider, event, booking string }{
		{"calendly-r1", "calendly", "invitee.rescheduled", "r1"},
		{"calendly-r2", "calendly", "invitee.rescheduled", "r2"},
		{"calcom-r3", "calcom", "BOOKING_RESCHEDULED", "r3"},
	}
	for i, c := range cases {
		first := "invitee.created"
		if c.provider == "calcom" {
			first = "BOOKING_CREATED"
		}
		s := old.Add(time.Duration(i) * 2 * time.Hour)
		send(t, env, srv.Base, c.provider, first, "--booking", c.booking, "--start", s.Format(time.RFC3339))
		w.waitSteps(t, c.thread, "host_calendar.create=done", "invitee_email.confirmation=done")
		args := []string{c.provider, c.event, "--booking", c.booking, "--start", s.Format(time.RFC3339), "--reschedule-to", to.Add(time.Duration(i) * 2 * time.Hour).Format(time.RFC3339)}
		if c.booking == "r2" {
			args = append(args, "--created-first")
		}
		out := send(t, env, srv.Base, args...)
		if c.provider == "calendly" {
			canceled, created := strings.Index(out, "invitee.canceled:"), strings.Index(out, "invitee.created:")
			require.True(t, canceled >= 0 && created >= 0, out)
			assert.Equal(t, c.booking == "r2", created < canceled, "order: %s", out)
		}
		waitFor(t, 60*time.Second, "reschedule of "+c.thread, func() (bool, string) {
			got := sortedStates(c.thread)
			return got == want, got
		})
	}
	objs := w.dav.Store.Objects()
	require.Len(t, objs, 3, "moved in place: one object per thread")
	starts := map[time.Time]bool{}
	for _, o := range objs {
		starts[o.Start.UTC()] = true
	}
	for i := range cases {
		assert.True(t, starts[to.Add(time.Duration(i)*2*time.Hour)], "object at the new slot %d", i)
	}
	assert.Equal(t, map[string]int{"Booking confirmed": 3, "Booking rescheduled": 3}, kindsOf(w.smtp.Delivered()))
}
