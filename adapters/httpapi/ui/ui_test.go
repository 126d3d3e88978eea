package ui_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/auth"
	"bookingledger/adapters/httpapi/ui"
	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
	"bookingledger/projections/history"
)

// The pages' handlers between the request and the read side: what they ask the reader, what they
// refuse before asking, and how a failure shows. The browser tests (cmd/bookingledger) run the same
// pages against a real server and database.

var today = time.Date(2030, 1, 9, 15, 4, 0, 0, time.UTC)

// reader answers from fixed data and records what it was asked.
type reader struct {
	queries  []calendar.CalendarQuery
	pages    int // the calendar has this many full pages of pageSize entries, then a last one
	pageSize int
	resolved []string
	err      error
}

func (f *reader) Calendar(_ context.Context, q calendar.CalendarQuery) (calendar.CalendarPage, error) {
	f.queries = append(f.queries, q)
	if f.err != nil {
		return calendar.CalendarPage{}, f.err
	}
	n := len(f.queries)
	p := calendar.CalendarPage{More: n <= f.pages}
	size := max(f.pageSize, 1)
	for i := range size {
		p.Entries = append(p.Entries, calendar.CalendarEntry{Booking: booking.ID(fmt.Sprintf("calendly-p%d-%d", n, i)), Provider: "calendly",
			Resource: "host-1", Start: q.From.Add(time.Hour), End: q.From.Add(90 * time.Minute), Status: calendar.StatusActive})
	}
	return p, nil
}

func (f *reader) History(_ context.Context, id booking.ID) (history.History, error) {
	if f.err != nil {
		return history.History{}, f.err
	}
	return history.History{}, fmt.Errorf("booking %s: %w", id, projections.ErrNotFound)
}

func (f *reader) OpenItems(context.Context) ([]calendar.Item, error) { return nil, f.err }

func (f *reader) Resolve(_ context.Context, id int64, note, by string) (calendar.Item, error) {
	if f.err != nil {
		return calendar.Item{}, f.err
	}
	f.resolved = append(f.resolved, fmt.Sprintf("%d %q", id, note))
	return calendar.Item{ID: id}, nil
}

type sessions struct{}

func (sessions) SignIn(http.ResponseWriter, *http.Request, string) (auth.Token, error) {
	return auth.Token{}, auth.ErrInvalidToken
}
func (sessions) SignOut(http.ResponseWriter, *http.Request) error { return nil }

type pages struct {
	*httptest.Server
	reader     *reader
	deliveries []ui.DeliveryQuery
	rows       int
}

func newPages(t *testing.T, r *reader) *pages {
	t.Helper()
	p := &pages{reader: r}
	mux := http.NewServeMux()
	require.NoError(t, ui.Register(mux, ui.Deps{
		Reader:   r,
		Sessions: sessions{},
		Deliveries: func(_ context.Context, q ui.DeliveryQuery) ([]ui.Delivery, error) {
			p.deliveries = append(p.deliveries, q)
			var out []ui.Delivery
			for i := range p.rows {
				out = append(out, ui.Delivery{ID: int64(1000 - i), Receipt: ledger.Receipt{Provider: "calendly", Outcome: ledger.OutcomeAccepted}})
			}
			return out, r.err
		},
		Providers: []string{"calendly", "stripe"},
		Clock:     func() time.Time { return today },
	}))
	p.Server = httptest.NewServer(mux)
	t.Cleanup(p.Close)
	p.Client().CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return p
}

// do answers the status, the Location and the body of a request.
func (p *pages) do(t *testing.T, method, path string, form url.Values) (int, string, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, p.URL+path, body)
	require.NoError(t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := p.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

// TestCalendarWithoutAClockShowsThisWeek: with no clock given, "today" is the wall clock's.
func TestCalendarWithoutAClockShowsThisWeek(t *testing.T) {
	r := &reader{}
	mux := http.NewServeMux()
	require.NoError(t, ui.Register(mux, ui.Deps{Reader: r, Sessions: sessions{}, Deliveries: func(context.Context, ui.DeliveryQuery) ([]ui.Delivery, error) { return nil, nil }}))
	before := time.Now().UTC().Truncate(24 * time.Hour)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/calendar", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Len(t, r.queries, 1)
	assert.WithinRange(t, r.queries[0].From, before, time.Now().UTC().Truncate(24*time.Hour))
}

func TestRegisterNeedsItsDependencies(t *testing.T) {
	err := ui.Register(http.NewServeMux(), ui.Deps{Reader: &reader{}, Sessions: sessions{}})
	assert.ErrorContains(t, err, "deliveries")
}

// TestPagesAreHTMLThatIsNeitherCachedNorFramed: every page carries the content policy, even an error.
func TestPagesAreHTMLThatIsNeitherCachedNorFramed(t *testing.T) {
	p := newPages(t, &reader{})
	for _, path := range []string{"/ui/login", "/ui/calendar", "/ui/calendar?view=month"} {
		resp, err := p.Client().Get(p.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"), path)
		assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"), path)
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), path)
		assert.Equal(t, "same-origin", resp.Header.Get("Referrer-Policy"), path)
		assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'", path)
		assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'", path)
	}
	status, loc, _ := p.do(t, http.MethodGet, "/ui/", nil)
	assert.Equal(t, http.StatusSeeOther, status)
	assert.Equal(t, "/ui/calendar", loc)
}

// TestCalendarAsksForItsWindow: the week from today (UTC) by default, a day or the week of a date when
// asked, the resource passed on; pages are followed to the last.
func TestCalendarAsksForItsWindow(t *testing.T) {
	r := &reader{pages: 2}
	p := newPages(t, r)
	status, _, body := p.do(t, http.MethodGet, "/ui/calendar", nil)
	require.Equal(t, http.StatusOK, status, body)
	day := time.Date(2030, 1, 9, 0, 0, 0, 0, time.UTC)
	require.Len(t, r.queries, 3, "two full pages and the last")
	assert.Equal(t, day, r.queries[0].From)
	assert.Equal(t, day.AddDate(0, 0, 7), r.queries[0].To)
	assert.Equal(t, calendar.MaxCalendarPage, r.queries[0].Limit)
	assert.Nil(t, r.queries[0].After)
	require.NotNil(t, r.queries[2].After, "the next page starts after the last entry")
	assert.Equal(t, booking.ID("calendly-p2-0"), r.queries[2].After.Booking)
	for _, id := range []string{"calendly-p1-0", "calendly-p2-0", "calendly-p3-0"} {
		assert.Contains(t, body, id)
	}
	assert.Contains(t, body, `href="/ui/calendar?date=2030-01-02&amp;view=week"`, "the previous week")
	assert.Contains(t, body, `href="/ui/calendar?date=2030-01-16&amp;view=week"`, "the next week")

	r.queries, r.pages = nil, 0
	status, _, body = p.do(t, http.MethodGet, "/ui/calendar?view=day&date=2030-01-07&resource=dr-smith", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Len(t, r.queries, 1)
	assert.Equal(t, calendar.CalendarQuery{From: day.AddDate(0, 0, -2), To: day.AddDate(0, 0, -1), Resource: "dr-smith", Limit: calendar.MaxCalendarPage}, r.queries[0])
	assert.Contains(t, body, `href="/ui/calendar?date=2030-01-06&amp;resource=dr-smith&amp;view=day"`, "the previous day keeps the view and the resource")
	assert.Contains(t, body, `href="/ui/calendar?date=2030-01-09&amp;resource=dr-smith&amp;view=day"`, "today")
}

// TestCalendarStopsAtItsBound: past 5,000 entries the page stops reading and says so.
func TestCalendarStopsAtItsBound(t *testing.T) {
	r := &reader{pages: 100, pageSize: 2500}
	p := newPages(t, r)
	status, _, body := p.do(t, http.MethodGet, "/ui/calendar?view=day", nil)
	require.Equal(t, http.StatusOK, status)
	assert.Len(t, r.queries, 2)
	assert.Contains(t, body, "More than 5000 bookings in this window")
}

// TestBadRequestsAreRefusedBeforeReading: each says what is wrong, and nothing is read or changed.
func TestBadRequestsAreRefusedBeforeReading(t *testing.T) {
	r := &reader{}
	p := newPages(t, r)
	for _, c := range []struct{ method, path, want string }{
		{http.MethodGet, "/ui/calendar?view=month", "view must be day or week"},
		{http.MethodGet, "/ui/calendar?date=07/01/2030", "date must look like 2026-12-01"},
		{http.MethodGet, "/ui/calendar?resource=" + strings.Repeat("r", 513), "resource is too long"},
		{http.MethodGet, "/ui/deliveries?provider=paypal", `unknown provider &#34;paypal&#34;`},
		{http.MethodGet, "/ui/deliveries?outcome=lost", `unknown outcome &#34;lost&#34;`},
		{http.MethodGet, "/ui/deliveries?before=0", "before must be a receipt id"},
		{http.MethodGet, "/ui/deliveries?before=x", "before must be a receipt id"},
		{http.MethodGet, "/ui/bookings/not%20an%20id", "invalid booking event: booking id &#34;not an id&#34; contains white space"},
		{http.MethodPost, "/ui/reconciliation/0/resolve", "not a reconciliation item id"},
		{http.MethodPost, "/ui/reconciliation/x/resolve", "not a reconciliation item id"},
		{http.MethodPost, "/ui/reconciliation/7/resolve?action=retry", "this server resolves no process steps"},
	} {
		var form url.Values
		path := c.path
		if c.method == http.MethodPost {
			path, form = strings.Split(c.path, "?")[0], url.Values{"note": {"n"}}
			if _, q, ok := strings.Cut(c.path, "?"); ok {
				v, _ := url.ParseQuery(q)
				form.Set("action", v.Get("action"))
			}
		}
		status, _, body := p.do(t, c.method, path, form)
		assert.Equal(t, http.StatusBadRequest, status, c.path)
		assert.Contains(t, body, `<p class="error" role="alert">`+c.want, c.path)
		assert.NotContains(t, body, "bad request", "the reason alone: %s", c.path)
	}
	assert.Empty(t, r.queries)
	assert.Empty(t, r.resolved)
	assert.Empty(t, p.deliveries)
	status, _, _ := p.do(t, http.MethodGet, "/ui/bookings/calendly-nobody", nil)
	assert.Equal(t, http.StatusNotFound, status)
}

// TestResolveRedirectsToTheInbox: a note resolves the item and the inbox says which.
func TestResolveRedirectsToTheInbox(t *testing.T) {
	r := &reader{}
	p := newPages(t, r)
	status, loc, _ := p.do(t, http.MethodPost, "/ui/reconciliation/7/resolve", url.Values{"note": {"host confirmed"}})
	assert.Equal(t, http.StatusSeeOther, status)
	assert.Equal(t, "/ui/reconciliation?resolved=7", loc)
	assert.Equal(t, []string{`7 "host confirmed"`}, r.resolved)

	r.err = fmt.Errorf("item 7: %w", projections.ErrItemClosed)
	status, _, _ = p.do(t, http.MethodPost, "/ui/reconciliation/7/resolve", url.Values{"note": {"again"}})
	assert.Equal(t, http.StatusConflict, status)
}

// TestDeliveriesPageOnward: one row more than a page is asked for; when it comes, the page links to
// the older ones with the same filters, before the last row shown.
func TestDeliveriesPageOnward(t *testing.T) {
	p := newPages(t, &reader{})
	p.rows = 101
	status, _, body := p.do(t, http.MethodGet, "/ui/deliveries?provider=calendly&outcome=accepted&before=2000", nil)
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, []ui.DeliveryQuery{{Provider: "calendly", Outcome: "accepted", BeforeID: 2000, Limit: 101}}, p.deliveries)
	assert.Contains(t, body, `href="/ui/deliveries?before=901&amp;outcome=accepted&amp;provider=calendly" rel="next"`)

	p.rows = 100
	status, _, body = p.do(t, http.MethodGet, "/ui/deliveries", nil)
	require.Equal(t, http.StatusOK, status, body)
	assert.NotContains(t, body, `rel="next"`, "the last page")
}

// TestAFailureShowsNothingOfItsCause: a read that fails for any other reason is a 500 whose page
// says only that the log has the cause.
func TestAFailureShowsNothingOfItsCause(t *testing.T) {
	p := newPages(t, &reader{err: errors.New("dial tcp 10.0.0.7:5432: password authentication failed for user ops")})
	for _, path := range []string{"/ui/calendar", "/ui/reconciliation", "/ui/deliveries", "/ui/bookings/calendly-a"} {
		status, _, body := p.do(t, http.MethodGet, path, nil)
		assert.Equal(t, http.StatusInternalServerError, status, path)
		assert.Contains(t, body, "Something went wrong; the server log has the cause.", path)
		assert.NotContains(t, body, "10.0.0.7", path)
	}
}

// people answers contacts and searches from a fixed table.
type people struct {
	contacts map[booking.ID]calendar.Contact
	searched []string
}

func (p *people) Contacts(_ context.Context, ids []booking.ID) (map[booking.ID]calendar.Contact, error) {
	out := map[booking.ID]calendar.Contact{}
	for _, id := range ids {
		if c, ok := p.contacts[id]; ok {
			out[id] = c
		}
	}
	return out, nil
}

func (p *people) Search(_ context.Context, text string, limit int) ([]calendar.SearchHit, error) {
	p.searched = append(p.searched, fmt.Sprintf("%s %d", text, limit))
	var out []calendar.SearchHit
	for id, c := range p.contacts {
		if strings.Contains(string(id), text) || strings.Contains(c.Name, text) {
			out = append(out, calendar.SearchHit{Booking: calendar.Booking{Booking: id, Status: calendar.StatusActive,
				Canonical: []string{"https://api.calendly.com/users/host-1"}}, Contact: c})
		}
	}
	return out, nil
}

func newPeoplePages(t *testing.T, r *reader, pp *people, failed []history.StepEntry) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	require.NoError(t, ui.Register(mux, ui.Deps{
		Reader: r, Sessions: sessions{}, People: pp, Clock: func() time.Time { return today },
		Deliveries:  func(context.Context, ui.DeliveryQuery) ([]ui.Delivery, error) { return nil, nil },
		FailedSteps: func(context.Context) ([]history.StepEntry, error) { return failed, nil },
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	srv.Client().CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return srv
}

func get(t *testing.T, srv *httptest.Server, path string, cookies ...*http.Cookie) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	require.NoError(t, err)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// TestCalendarNamesInviteesInTheChosenZone: a card names its invitee (contacts table), else its id;
// the zone (cookie or ?tz=) sets the days' bounds and the times shown; ?week= opens that week's Monday.
func TestCalendarNamesInviteesInTheChosenZone(t *testing.T) {
	r := &reader{}
	pp := &people{contacts: map[booking.ID]calendar.Contact{"calendly-p1-0": {Booking: "calendly-p1-0", Name: "Ada Lovelace", Email: "ada@example.com"}}}
	srv := newPeoplePages(t, r, pp, nil)
	_, body := get(t, srv, "/ui/calendar?date=2030-01-07")
	assert.Contains(t, body, `<span class="inv">Ada Lovelace</span>`)
	assert.Contains(t, body, `<span class="time">01:00–01:30</span>`, "UTC without a choice")
	assert.Equal(t, time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC), r.queries[0].From)

	r.queries = nil
	_, body = get(t, srv, "/ui/calendar?date=2030-01-07", &http.Cookie{Name: ui.ZoneCookie, Value: "America/New_York"})
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	assert.Equal(t, time.Date(2030, 1, 7, 0, 0, 0, 0, ny).UTC(), r.queries[0].From.UTC(), "the day starts at New York's midnight")
	assert.Contains(t, body, `<span class="time">01:00–01:30</span>`, "an hour after that midnight")
	assert.Contains(t, body, `data-current="America/New_York"`)

	r.queries = nil
	_, body = get(t, srv, "/ui/calendar?week=2030-01-10&tz=Asia/Tokyo")
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	assert.Equal(t, time.Date(2030, 1, 7, 0, 0, 0, 0, tokyo).UTC(), r.queries[0].From.UTC(), "Thursday's week starts on Monday")
	assert.Equal(t, time.Date(2030, 1, 14, 0, 0, 0, 0, tokyo).UTC(), r.queries[0].To.UTC())
	assert.Contains(t, body, `<h2 id="window">Mon 7 Jan 2030 – Sun 13 Jan 2030</h2>`)
	assert.NotContains(t, body, `type="date"`, "no browser-formatted date beside the page's own format")
	assert.Contains(t, body, `href="/ui/calendar?date=2030-01-14&amp;tz=Asia%2FTokyo&amp;view=week" rel="next"`, "links stay in the zone")

	pp.contacts = nil // erased
	_, body = get(t, srv, "/ui/calendar?date=2030-01-07")
	assert.NotContains(t, body, "Ada Lovelace")
	assert.Contains(t, body, `<span class="inv">calendly-p`, "the id when no name is kept")

	resp, body := get(t, srv, "/ui/calendar?week=soon")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, body, "week must be a date like 2026-12-01")
}

// TestTimeZoneIsKeptInACookie: choosing a zone sets the cookie and goes back where it was chosen
// (on this server only); an unknown zone is refused.
func TestTimeZoneIsKeptInACookie(t *testing.T) {
	srv := newPeoplePages(t, &reader{}, &people{}, nil)
	resp, _ := get(t, srv, "/ui/timezone?tz=Europe/Berlin&next="+url.QueryEscape("/ui/calendar?tz=UTC&date=2030-01-07"))
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, "/ui/calendar?date=2030-01-07", resp.Header.Get("Location"))
	require.Len(t, resp.Cookies(), 1)
	assert.Equal(t, ui.ZoneCookie, resp.Cookies()[0].Name)
	assert.Equal(t, "Europe/Berlin", resp.Cookies()[0].Value)
	assert.Equal(t, "/ui/", resp.Cookies()[0].Path)

	resp, _ = get(t, srv, "/ui/timezone?tz=Europe/Berlin&next=https://evil.example/")
	assert.Equal(t, "/ui/calendar", resp.Header.Get("Location"))
	resp, body := get(t, srv, "/ui/timezone?tz=Mars/Olympus")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, body, "unknown time zone")
	assert.Empty(t, resp.Cookies())
}

// TestSearchPage: the box, the hits with their invitee, and a plain word when nothing matches.
func TestSearchPage(t *testing.T) {
	pp := &people{contacts: map[booking.ID]calendar.Contact{"calendly-b1": {Booking: "calendly-b1", Name: "Ada Lovelace", Email: "ada@example.com"}}}
	srv := newPeoplePages(t, &reader{}, pp, nil)
	_, body := get(t, srv, "/ui/search")
	assert.NotContains(t, body, "search-results")
	assert.Empty(t, pp.searched, "no search without a text")
	_, body = get(t, srv, "/ui/search?q=Ada")
	assert.Contains(t, body, `data-booking="calendly-b1"`)
	assert.Contains(t, body, "ada@example.com")
	assert.Contains(t, body, `<span title="https://api.calendly.com/users/host-1">host-1</span>`)
	assert.Equal(t, []string{"Ada 50"}, pp.searched)
	_, body = get(t, srv, "/ui/search?q=Grace")
	assert.Contains(t, body, `id="no-hits"`)
	resp, _ := get(t, srv, "/ui/search?q="+strings.Repeat("x", 201))
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

// TestInboxSaysWhatToDo: each kind with what it asks of the operator, failed steps listed, and a
// resolved conflict's notice says the provider still holds both.
func TestInboxSaysWhatToDo(t *testing.T) {
	failed := []history.StepEntry{{Kind: "invitee_email.confirmation", Booking: "calendly-b1", State: "failed", Attempts: 1, LastError: "smtp 550: no such user"}}
	srv := newPeoplePages(t, &reader{}, &people{}, failed)
	_, body := get(t, srv, "/ui/reconciliation")
	assert.Contains(t, body, `id="failed-steps"`)
	assert.Contains(t, body, "smtp 550: no such user")
	assert.Contains(t, body, "They will not be tried again.")
	assert.NotContains(t, body, `id="inbox-empty"`)
	_, body = get(t, srv, "/ui/reconciliation?resolved=7&kind=conflict")
	assert.Contains(t, body, "The provider still holds both bookings.")
	_, body = get(t, srv, "/ui/reconciliation?resolved=7&kind=step")
	assert.NotContains(t, body, "still holds both")

	srv = newPeoplePages(t, &reader{}, &people{}, nil)
	_, body = get(t, srv, "/ui/reconciliation")
	assert.Contains(t, body, `id="inbox-empty"`)
}

// TestUnknownPagesAndRefusalsArePages: an unknown /ui/ address and the auth layer's refusals of a
// browser are HTML pages; API clients and fetches keep JSON.
func TestUnknownPagesAndRefusalsArePages(t *testing.T) {
	srv := newPeoplePages(t, &reader{}, &people{}, nil)
	resp, body := get(t, srv, "/ui/nowhere")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Contains(t, body, "There is no page at this address.")

	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/ui/admin/endpoints", nil)
	req.Header.Set("Accept", "text/html")
	ui.Refusal(rec, req, http.StatusForbidden, "insufficient_scope", `token "desk" has the read scope; GET /ui/admin/endpoints needs the admin scope`)
	assert.Equal(t, http.StatusForbidden, rec.Code)
	assert.Equal(t, "text/html; charset=utf-8", rec.Header().Get("Content-Type"))
	assert.Contains(t, rec.Body.String(), "<h1>Admins only</h1>")
	assert.Contains(t, rec.Body.String(), "needs a token with the <strong>admin</strong> scope")

	for _, c := range []struct {
		path, accept, authz string
		want                bool
	}{
		{"/ui/admin/endpoints", "text/html,application/xhtml+xml", "", true},
		{"/admin/jobs/", "text/html", "", true},
		{"/admin/jobs/api/jobs", "*/*", "", false},
		{"/ui/admin/endpoints", "text/html", "Bearer blt_x", false},
		{"/api/admin/endpoints", "text/html", "", false},
	} {
		req := httptest.NewRequest(http.MethodGet, c.path, nil)
		req.Header.Set("Accept", c.accept)
		if c.authz != "" {
			req.Header.Set("Authorization", c.authz)
		}
		assert.Equal(t, c.want, ui.WantsPage(req), "%+v", c)
	}
}
