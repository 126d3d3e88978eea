package ui

import (
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/relay"
	"bookingledger/domain/booking"
	"bookingledger/projections"
)

// TestSafeNextKeepsTheRedirectOnThisServer: after sign-in the UI redirects only to its own pages and
// the jobs UI; anything that could leave the server, or loop back to the sign-in, goes to the calendar.
func TestSafeNextKeepsTheRedirectOnThisServer(t *testing.T) {
	for next, want := range map[string]string{
		"/ui/bookings/calendly-demo-1":      "/ui/bookings/calendly-demo-1",
		"/ui/calendar?from=2030-01-07":      "/ui/calendar?from=2030-01-07",
		"/admin/jobs/":                      "/admin/jobs/",
		"":                                  "/ui/calendar",
		"/ui/login":                         "/ui/calendar",
		"/ui/login?next=/ui/calendar":       "/ui/calendar",
		"/api/calendar":                     "/ui/calendar",
		"/uix/calendar":                     "/ui/calendar",
		"ui/calendar":                       "/ui/calendar",
		"https://evil.example/ui/calendar":  "/ui/calendar",
		"//evil.example/ui/calendar":        "/ui/calendar",
		"///evil.example/ui/":               "/ui/calendar",
		"///ui/calendar":                    "/ui/calendar", // a browser takes "ui" for the host
		"/\\evil.example/ui/":               "/ui/calendar",
		"/ui/\\..\\evil":                    "/ui/calendar",
		"javascript:alert(1)//ui/":          "/ui/calendar",
		"http:/ui/calendar":                 "/ui/calendar",
		"/ui/%zz":                           "/ui/calendar",
		"/ui/../api/calendar":               "/ui/calendar",
		"/ui/%2e%2e/api/calendar":           "/ui/calendar",
		"/ui/%2E%2E/admin/jobs/":            "/ui/calendar",
		"/ui/./calendar":                    "/ui/calendar",
		"/ui//calendar":                     "/ui/calendar",
		"/ui/bookings/":                     "/ui/bookings/",
		"/ui/bookings/x/..":                 "/ui/calendar",
		"/admin/jobs/queues?x=https://evil": "/admin/jobs/queues?x=https://evil",
	} {
		assert.Equal(t, want, safeNext(next), "next %q", next)
	}
}

func TestAgeRoundsDown(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                               "just now",
		59 * time.Second:                "just now",
		time.Minute:                     "1 min",
		59*time.Minute + 59*time.Second: "59 min",
		time.Hour:                       "1 h",
		47*time.Hour + 59*time.Minute:   "47 h",
		48 * time.Hour:                  "2 days",
		10*24*time.Hour - time.Second:   "9 days",
	} {
		assert.Equal(t, want, age(d), "%v", d)
	}
}

// TestGridPlacesEntriesByDayAndMarksHolders: one row per canonical resource (a provider's own id when
// it has none), sorted; an entry in every day column its slot overlaps, half-open; an active entry
// is a holder only when a conflict on its row overlaps it.
func TestGridPlacesEntriesByDayAndMarksHolders(t *testing.T) {
	day := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	days := []time.Time{day, day.AddDate(0, 0, 1), day.AddDate(0, 0, 2)}
	at := func(d, h int) time.Time { return day.AddDate(0, 0, d).Add(time.Duration(h) * time.Hour) }
	entry := func(id, res, canonical string, from, to time.Time, st projections.Status) projections.CalendarEntry {
		return projections.CalendarEntry{Booking: booking.ID(id), Resource: res, Canonical: canonical, Start: from, End: to, Status: st}
	}
	rows := grid([]projections.CalendarEntry{
		entry("holder", "cal-a", "dr-smith", at(0, 10), at(0, 11), projections.StatusActive),
		entry("loser", "cal-b", "dr-smith", at(0, 10), at(0, 11), projections.StatusConflict),
		entry("after", "cal-a", "dr-smith", at(0, 11), at(0, 12), projections.StatusActive), // touches the conflict: no holder
		entry("before", "cal-a", "dr-smith", at(0, 9), at(0, 10), projections.StatusActive), // so does this one
		entry("elsewhere", "cal-c", "", at(0, 10), at(0, 11), projections.StatusActive),     // same time, another row
		entry("night", "cal-c", "", at(1, 23), at(2, 1), projections.StatusActive),          // two days
		entry("midnight", "cal-c", "", at(1, 0), at(2, 0), projections.StatusCanceled),      // one day, ends at the next's start
	}, days)
	type cell struct {
		id     string
		holder bool
	}
	got := map[string][][]cell{}
	var order []string
	for _, r := range rows {
		order = append(order, r.Resource)
		for _, cs := range r.Cells {
			var col []cell
			for _, c := range cs {
				col = append(col, cell{string(c.Booking), c.Holder})
			}
			slices.SortFunc(col, func(a, b cell) int { return strings.Compare(a.id, b.id) })
			got[r.Resource] = append(got[r.Resource], col)
		}
	}
	assert.Equal(t, []string{"cal-c", "dr-smith"}, order)
	assert.Equal(t, [][]cell{{{"after", false}, {"before", false}, {"holder", true}, {"loser", false}}, nil, nil}, got["dr-smith"])
	assert.Equal(t, [][]cell{{{"elsewhere", false}}, {{"midnight", false}, {"night", false}}, {{"night", false}}}, got["cal-c"])
}

// TestReplayQueryReadsTheForm: from and to as the form's UTC minutes or RFC 3339, the types narrowed,
// only_failed only when checked; a missing or malformed time or type is a bad request naming it.
func TestReplayQueryReadsTheForm(t *testing.T) {
	q, d, err := replayQuery(7, url.Values{"from": {"2030-01-07T08:00"}, "to": {"2030-01-08T10:00:00+02:00"}, "types": {" booking.*, booking.canceled.v1 ,"}, "only_failed": {"on"}})
	require.NoError(t, err)
	assert.Equal(t, relay.ReplayQuery{EndpointID: 7, From: time.Date(2030, 1, 7, 8, 0, 0, 0, time.UTC), To: time.Date(2030, 1, 8, 8, 0, 0, 0, time.UTC),
		Types: []string{"booking.*", "booking.canceled.v1"}, OnlyFailed: true}, q)
	assert.Equal(t, time.UTC, q.To.Location())
	assert.Equal(t, "2030-01-07T08:00", d.From, "the form shows what was typed")

	q, _, err = replayQuery(7, url.Values{"from": {"2030-01-07T08:00"}, "to": {"2030-01-07T09:00"}, "only_failed": {"yes"}})
	require.NoError(t, err)
	assert.False(t, q.OnlyFailed)
	assert.Empty(t, q.Types)

	for name, v := range map[string]url.Values{
		"from": {"to": {"2030-01-07T09:00"}},
		"to":   {"from": {"2030-01-07T08:00"}, "to": {"tomorrow"}},
	} {
		_, _, err := replayQuery(7, v)
		assert.ErrorIs(t, err, errBadRequest, name)
		assert.EqualError(t, err, name+" must be a time like 2026-12-01T08:00 (UTC)")
	}
	_, _, err = replayQuery(7, url.Values{"from": {"2030-01-07T08:00"}, "to": {"2030-01-07T09:00"}, "types": {"Booking.*"}})
	assert.ErrorIs(t, err, relay.ErrInvalidTypes, "a bad request to fail")
	assert.ErrorContains(t, err, `"Booking.*"`)
}
