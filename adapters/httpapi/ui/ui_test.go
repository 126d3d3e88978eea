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
)

// The pages' handlers between the request and the read side: what they ask the reader, what they
// refuse before asking, and how a failure shows. The browser tests (cmd/bookingledger) run the same
// pages against a real server and database.

var today = time.Date(2030, 1, 9, 15, 4, 0, 0, time.UTC)

// reader answers from fixed data and records what it was asked.
type reader struct {
	queries  []projections.CalendarQuery
	pages    int // the calendar has this many full pages of pageSize entries, then a last one
	pageSize int
	resolved []string
	err      error
}

func (f *reader) Calendar(_ context.Context, q projections.CalendarQuery) (projections.CalendarPage, error) {
	f.queries = append(f.queries, q)
	if f.err != nil {
		return projections.CalendarPage{}, f.err
	}
	n := len(f.queries)
	p := projections.CalendarPage{More: n <= f.pages}
	size := max(f.pageSize, 1)
	for i := range size {
		p.Entries = append(p.Entries, projections.CalendarEntry{Booking: booking.ID(fmt.Sprintf("calendly-p%d-%d", n, i)), Provider: "calendly",
			Resource: "host-1", Start: q.From.Add(time.Hour), End: q.From.Add(90 * time.Minute), Status: projections.StatusActive})
	}
	return p, nil
}

func (f *reader) History(_ context.Context, id booking.ID) (projections.History, error) {
	if f.err != nil {
		return projections.History{}, f.err
	}
	return projections.History{}, fmt.Errorf("booking %s: %w", id, projections.ErrNotFound)
}

func (f *reader) OpenItems(context.Context) ([]projections.Item, error) { return nil, f.err }

func (f *reader) Resolve(_ context.Context, id int64, note, by string) (projections.Item, error) {
	if f.err != nil {
		return projections.Item{}, f.err
	}
	f.resolved = append(f.resolved, fmt.Sprintf("%d %q", id, note))
	return projections.Item{ID: id}, nil
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
	assert.Equal(t, projections.MaxCalendarPage, r.queries[0].Limit)
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
	assert.Equal(t, projections.CalendarQuery{From: day.AddDate(0, 0, -2), To: day.AddDate(0, 0, -1), Resource: "dr-smith", Limit: projections.MaxCalendarPage}, r.queries[0])
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
