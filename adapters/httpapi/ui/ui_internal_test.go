package ui

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/relay"
	"bookingledger/domain/booking"
	"bookingledger/projections/calendar"
	"bookingledger/projections/history"
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
	entry := func(id, res, canonical string, from, to time.Time, st calendar.Status) calendar.CalendarEntry {
		return calendar.CalendarEntry{Booking: booking.ID(id), Resource: res, Canonical: canonical, Start: from, End: to, Status: st}
	}
	rows := grid([]calendar.CalendarEntry{
		entry("holder", "cal-a", "dr-smith", at(0, 10), at(0, 11), calendar.StatusActive),
		entry("loser", "cal-b", "dr-smith", at(0, 10), at(0, 11), calendar.StatusConflict),
		entry("after", "cal-a", "dr-smith", at(0, 11), at(0, 12), calendar.StatusActive), // touches the conflict: no holder
		entry("before", "cal-a", "dr-smith", at(0, 9), at(0, 10), calendar.StatusActive), // so does this one
		entry("elsewhere", "cal-c", "", at(0, 10), at(0, 11), calendar.StatusActive),     // same time, another row
		entry("night", "cal-c", "", at(1, 23), at(2, 1), calendar.StatusActive),          // two days
		entry("midnight", "cal-c", "", at(1, 0), at(2, 0), calendar.StatusCanceled),      // one day, ends at the next's start
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

// TestHostNameShortensProviderURIs: a linked name stays, a provider's URI is named by its last part.
func TestHostNameShortensProviderURIs(t *testing.T) {
	for in, want := range map[string]string{
		"dr-smith":           "dr-smith",
		"acuity-calendar-77": "acuity-calendar-77",
		"https://api.calendly.com/users/AAAA-BBBB":  "AAAA-BBBB",
		"https://api.calendly.com/users/AAAA-BBBB/": "AAAA-BBBB",
		"https://calendar.example.com":              "calendar.example.com",
	} {
		assert.Equal(t, want, hostName(in), in)
	}
}

// TestZoneFuncsUseOneFormatInTheZone: every time in the page's zone, in the one date format.
func TestZoneFuncsUseOneFormatInTheZone(t *testing.T) {
	berlin, ok := loadZone("Europe/Berlin")
	require.True(t, ok)
	f := zoneFuncs(berlin)
	at := time.Date(2026, 12, 1, 10, 0, 5, 0, time.UTC)
	assert.Equal(t, "Tue 1 Dec 2026 11:00:05", f["stamp"].(func(time.Time) string)(at))
	assert.Equal(t, "–", f["stamp"].(func(time.Time) string)(time.Time{}))
	assert.Equal(t, "11:00", f["hm"].(func(time.Time) string)(at))
	assert.Equal(t, "Tue 1 Dec 2026, 11:00–11:30", f["slot"].(func(time.Time, time.Time) string)(at, at.Add(30*time.Minute)))
	assert.Equal(t, "Tue 1 Dec 2026, 23:30 – Wed 2 Dec 2026, 00:30", f["slot"].(func(time.Time, time.Time) string)(at.Add(12*time.Hour+30*time.Minute), at.Add(13*time.Hour+30*time.Minute)))
	for _, bad := range []string{"", "Local", "../../etc/passwd", "/etc/localtime", "Mars/Olympus", strings.Repeat("a", 65)} {
		_, ok := loadZone(bad)
		assert.False(t, ok, bad)
	}
	assert.Equal(t, "/ui/calendar?date=2026-12-01", withoutTZ("/ui/calendar?tz=UTC&date=2026-12-01"))
	assert.Equal(t, "/ui/calendar", withoutTZ("/ui/calendar?tz=UTC"))
}

// TestStoryTellsTheBookingPlainly: notices, steps and deliveries in the order they happened, in
// words; the problems ask for the inbox.
func TestStoryTellsTheBookingPlainly(t *testing.T) {
	at := func(m int) time.Time { return time.Date(2026, 12, 1, 9, m, 0, 0, time.UTC) }
	h := history.History{
		State:    calendar.Booking{Provider: "calendly"},
		Receipts: []history.ReceiptEntry{{Provider: "calendly", ReceivedAt: at(0), Outcome: "accepted"}, {Provider: "calendly", ReceivedAt: at(2), Outcome: "duplicate"}},
		Events: []history.HistoryEvent{{Type: booking.TypeScheduled, Provider: "calendly", RecordedAt: at(0), Applied: true},
			{Type: booking.TypeCanceled, Provider: "calendly", RecordedAt: at(9), Applied: true, Summary: "canceled by invitee: ill"}},
		Steps: []history.StepEntry{{Kind: "invitee_email.confirmation", State: "done", FinishedAt: at(1)},
			{Kind: "host_calendar.create", State: "failed", Attempts: 10, FinishedAt: at(5), LastError: "caldav: 403"},
			{Kind: "invitee_email.cancellation", State: "needs_reconciliation", FinishedAt: at(10)}},
	}
	lines := story(h, []relay.Delivery{{EndpointID: 3, Type: "booking.scheduled.v1", State: relay.StateSucceeded, CompletedAt: at(3)}}, "Ada Lovelace")
	var texts []string
	var inbox []bool
	for _, l := range lines {
		texts = append(texts, l.Text)
		inbox = append(inbox, l.Inbox)
	}
	assert.Equal(t, []string{
		"Calendly booked it.",
		"Emailed the confirmation to Ada Lovelace.",
		"Calendly sent the same notice again; nothing changed.",
		"Sent booking.scheduled.v1 to endpoint #3.",
		"Gave up trying to add it to the host's calendar after 10 attempt(s). The last error: caldav: 403",
		"Calendly canceled it, by invitee: ill.",
		"Tried to email the cancellation to Ada Lovelace, but the answer never came: it is not known whether it happened. The inbox asks you to check.",
	}, texts)
	assert.Equal(t, []bool{false, false, false, false, true, false, true}, inbox)
}

// TestWayBackAddsTheLinkToPagesOnly: HTML pages get the link before </body>, with a fitting length;
// JSON and requests that do not want HTML pass unchanged.
func TestWayBackAddsTheLinkToPagesOnly(t *testing.T) {
	h := WayBack(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/api") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"a":"</body>"}`))
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Length", "38")
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte(`<html><body><div id=root></div></body>`))
	}))
	get := func(path, accept string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Accept", accept)
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := get("/admin/jobs/", "text/html,application/xhtml+xml")
	assert.Equal(t, http.StatusTeapot, rec.Code)
	assert.Equal(t, `<html><body><div id=root></div>`+backLink+`</body>`, rec.Body.String())
	assert.Equal(t, strconv.Itoa(rec.Body.Len()), rec.Header().Get("Content-Length"))
	assert.Equal(t, `{"a":"</body>"}`, get("/admin/jobs/api", "text/html").Body.String(), "JSON is left alone")
	assert.NotContains(t, get("/admin/jobs/", "*/*").Body.String(), "back-to-ui", "a fetch is left alone")
}
