package ui

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"bookingledger/adapters/httpapi/auth"
	"bookingledger/adapters/relay"
	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
	"bookingledger/projections/history"
)

// Reader is what the pages read and change (readmodel.ReadModel implements it).
type Reader interface {
	Calendar(ctx context.Context, q calendar.CalendarQuery) (calendar.CalendarPage, error)
	History(ctx context.Context, id booking.ID) (history.History, error)
	OpenItems(ctx context.Context) ([]calendar.Item, error)
	Resolve(ctx context.Context, id int64, note, by string) (calendar.Item, error)
}

// DeliveryQuery selects receipts for the deliveries log: newest first, strictly before BeforeID.
type DeliveryQuery struct {
	Provider, Outcome string
	BeforeID          int64
	Limit             int
}

// Delivery is one receipt in the log (no body).
type Delivery struct {
	ID      int64
	Receipt ledger.Receipt
}

// People reads invitees from the erasable contacts table (readmodel.ReadModel implements it, as it
// implements readapi.PeopleReader): names and email addresses never come from events, and an erased
// person's are gone.
type People interface {
	Contacts(ctx context.Context, ids []booking.ID) (map[booking.ID]calendar.Contact, error)
	Search(ctx context.Context, text string, limit int) ([]calendar.SearchHit, error)
}

// Sessions signs browsers in and out (auth.Authenticator implements it).
type Sessions interface {
	SignIn(w http.ResponseWriter, r *http.Request, token string) (auth.Token, error)
	SignOut(w http.ResponseWriter, r *http.Request) error
}

// StepResolver closes a process step's reconciliation item with an action (mark-done, retry, skip)
// and records who did (adapters/postgres/stepstore.Store implements it, as it does readapi.StepResolver).
type StepResolver interface {
	ResolveStep(ctx context.Context, id int64, action, note, by string) (calendar.Item, error)
}

// Deps are the UI's dependencies.
type Deps struct {
	Reader     Reader
	Deliveries func(ctx context.Context, q DeliveryQuery) ([]Delivery, error)
	Sessions   Sessions
	// Steps, when set, lets the inbox resolve process step items with an action.
	Steps StepResolver
	// StepActions are the actions the step form offers (adapters/postgres/stepstore.Actions).
	StepActions []string
	// Relay, when set, adds the endpoints pages and the deliveries on a booking's timeline.
	Relay Relay
	// People, when set, puts invitees' names on the calendar and the timeline and adds the search.
	People People
	// FailedSteps, when set, lists the process steps that gave up, for the inbox.
	FailedSteps func(ctx context.Context) ([]history.StepEntry, error)
	// Providers are the provider names the deliveries filter offers.
	Providers []string
	// ProviderStatus, when set, adds the Providers page: subscriptions, last webhook, last sync.
	ProviderStatus providerStatusFunc
	// Links are further admin pages shown in the navigation for admin tokens (River's UI).
	Links  []Link
	Logger *slog.Logger
	// Clock is "today" for the calendar; nil is time.Now.
	Clock func() time.Time
}

// Link is a navigation entry.
type Link struct{ Name, Href string }

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// outcomes are the receipt outcomes the deliveries filter offers.
var outcomes = []ledger.Outcome{ledger.OutcomeAccepted, ledger.OutcomeDuplicate, ledger.OutcomeIgnored,
	ledger.OutcomeQuarantined, ledger.OutcomeRejected, ledger.OutcomeDeferred}

// maxCalendarEntries bounds one calendar page of the UI (pages of the read model are followed up to
// it); past it the page says so and offers the per-resource filter.
const maxCalendarEntries = 5000

// Mux is where Register mounts the routes (an auth.Routes on the server).
type Mux interface {
	Handle(pattern string, h http.Handler)
	HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request))
}

type server struct {
	Deps
	pages map[string]*template.Template
}

// Register mounts the UI's routes on mux.
func Register(mux Mux, d Deps) error {
	if d.Reader == nil || d.Deliveries == nil || d.Sessions == nil {
		return errors.New("ui: reader, deliveries and sessions are required")
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	s := &server{Deps: d, pages: map[string]*template.Template{}}
	var err error
	if s.pages, err = parsePages(); err != nil {
		return err
	}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return err
	}
	files := http.StripPrefix("/ui/static/", http.FileServerFS(static))
	mux.Handle("GET /ui/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	}))
	mux.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/calendar", http.StatusSeeOther)
	})
	mux.HandleFunc("GET "+auth.LoginPath, s.loginPage)
	mux.HandleFunc("POST "+auth.LoginPath, s.login)
	mux.HandleFunc("POST "+auth.LogoutPath, s.logout)
	mux.HandleFunc("GET /ui/calendar", s.calendar)
	mux.HandleFunc("GET /ui/bookings/{booking}", s.booking)
	mux.HandleFunc("GET /ui/reconciliation", s.inbox)
	mux.HandleFunc("POST /ui/reconciliation/{id}/resolve", s.resolve)
	mux.HandleFunc("GET /ui/deliveries", s.deliveries)
	mux.HandleFunc("GET /ui/timezone", s.setZone)
	mux.HandleFunc("GET /ui/search", s.search)
	if d.ProviderStatus != nil {
		mux.HandleFunc("GET /ui/providers", s.providers)
	}
	mux.HandleFunc("GET /ui/", func(w http.ResponseWriter, r *http.Request) {
		s.render(w, r, http.StatusNotFound, "error", "Not found", errorData{Message: "There is no page at this address."})
	})
	if d.Relay != nil {
		s.registerRelay(mux)
	}
	return nil
}

// pageNames are the templates, each with the layout.
var pageNames = []string{"login", "calendar", "booking", "inbox", "deliveries", "endpoints", "endpoint", "replay", "progress", "error", "search", "providers"}

func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).Funcs(zoneFuncs(time.UTC)).ParseFS(templateFiles, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("ui: template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// page is what every template gets.
type page struct {
	Title string
	Nav   string
	Who   string
	Admin bool
	// Relay: the endpoints pages exist (shown to admins).
	Relay bool
	// Search: the search box is shown (People is set).
	Search bool
	// Providers: the Providers page exists.
	Providers bool
	Query     string
	Links     []Link
	// Zone is the zone times are shown in; Zones the selector's choices; Here the page's address,
	// where choosing a zone comes back to.
	Zone  string
	Zones []string
	Here  string
	Data  any
}

func (s *server) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	loc := zoneOf(r)
	p := page{Title: title, Nav: name, Data: data, Relay: s.Relay != nil, Search: s.People != nil, Providers: s.ProviderStatus != nil,
		Zone: loc.String(), Zones: zoneChoices(loc.String()), Here: here(r)}
	if name == "search" {
		p.Query = r.URL.Query().Get("q")
	}
	if t, ok := auth.FromContext(r.Context()); ok {
		p.Who, p.Admin = t.Name, t.Scope.Allows(auth.ScopeAdmin)
		if p.Admin {
			p.Links = s.Links
		}
	}
	writePage(w, s.Logger, s.pages[name], name, status, p, loc)
}

// here is where choosing a zone comes back to: the page, or the calendar after a form's post.
func here(r *http.Request) string {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return "/ui/calendar"
	}
	return r.URL.RequestURI()
}

// writePage executes t in loc's zone and writes it with the pages' headers.
func writePage(w http.ResponseWriter, log *slog.Logger, t *template.Template, name string, status int, p page, loc *time.Location) {
	var buf bytes.Buffer
	t, err := t.Clone()
	if err == nil {
		err = t.Funcs(zoneFuncs(loc)).Execute(&buf, p)
	}
	if err != nil {
		log.Error("ui: render", "page", name, "error", err.Error())
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := http.StatusInternalServerError, "Something went wrong; the server log has the cause."
	switch {
	case errors.Is(err, projections.ErrNotFound), errors.Is(err, relay.ErrNotFound):
		status, msg = http.StatusNotFound, err.Error()
	case errors.Is(err, projections.ErrInvalidQuery), errors.Is(err, booking.ErrInvalidEvent), errors.Is(err, errBadRequest),
		errors.Is(err, relay.ErrInvalid), errors.Is(err, relay.ErrInvalidTypes):
		status, msg = http.StatusBadRequest, err.Error()
	case errors.Is(err, projections.ErrItemClosed):
		status, msg = http.StatusConflict, err.Error()
	default:
		if r.Context().Err() != nil {
			return
		}
		s.Logger.Error("ui", "method", r.Method, "path", r.URL.Path, "error", err.Error())
	}
	s.render(w, r, status, "error", http.StatusText(status), errorData{Message: msg})
}

// errorData is the error page's: the message, and for a refused scope what to do about it.
type errorData struct {
	Message string
	Code    string
}

var errBadRequest = errors.New("bad request")

// safeNext keeps a post-sign-in redirect on this server's pages: the operator UI's and the job
// dashboard's, named by a path without dot segments ("/ui/../api/calendar" would leave them; a
// browser resolves "%2e%2e" as ".." too, and Path is decoded).
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.IsAbs() || u.Host != "" || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") ||
		!(strings.HasPrefix(u.Path, "/ui/") || strings.HasPrefix(u.Path, "/admin/")) || u.Path == auth.LoginPath ||
		!isCleanPath(u.Path) {
		return "/ui/calendar"
	}
	return next
}

// isCleanPath says whether p has no dot segments and no empty ones; a trailing slash is kept.
func isCleanPath(p string) bool {
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean == p
}

type loginData struct {
	Next, Error string
}

func (s *server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login", "Sign in", loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

func (s *server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	next := safeNext(r.PostFormValue("next"))
	_, err := s.Sessions.SignIn(w, r, r.PostFormValue("token"))
	switch {
	case errors.Is(err, auth.ErrRateLimited):
		s.render(w, r, http.StatusTooManyRequests, "login", "Sign in", loginData{Next: next, Error: "Too many failed attempts from this address; wait a minute."})
	case errors.Is(err, auth.ErrExpired), errors.Is(err, auth.ErrRevoked), errors.Is(err, auth.ErrInvalidToken):
		s.render(w, r, http.StatusUnauthorized, "login", "Sign in", loginData{Next: next, Error: "That token is not valid (" + err.Error() + ")."})
	case err != nil:
		s.fail(w, r, err)
	default:
		http.Redirect(w, r, next, http.StatusSeeOther)
	}
}

func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	if err := s.Sessions.SignOut(w, r); err != nil {
		s.fail(w, r, err)
		return
	}
	http.Redirect(w, r, auth.LoginPath, http.StatusSeeOther)
}

func (s *server) booking(w http.ResponseWriter, r *http.Request) {
	id := booking.ID(r.PathValue("booking"))
	if err := id.Validate(); err != nil {
		s.fail(w, r, err)
		return
	}
	h, err := s.Reader.History(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	t := newTimeline(h)
	if s.Relay != nil {
		// The same selection as `bookingledger history` and GET /api/bookings/{booking}/deliveries.
		if t.Deliveries, err = s.Relay.Deliveries(r.Context(), relay.DeliveryQuery{Booking: string(id), Limit: bookingDeliveries}); err != nil {
			s.fail(w, r, err)
			return
		}
		t.Relay = true
	}
	who := "the invitee"
	if s.People != nil {
		cs, err := s.People.Contacts(r.Context(), []booking.ID{id})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		t.Contact, t.People = cs[id], true
		if n := invitee(t.Contact); n != "" {
			who = n
		}
	}
	t.Story = story(h, t.Deliveries, who)
	title := string(id)
	if n := invitee(t.Contact); n != "" {
		title = n
	}
	s.render(w, r, http.StatusOK, "booking", title, t)
}

// inboxFailed bounds the failed steps the inbox lists (bookingledger steps --state failed lists all).
const inboxFailed = 200

// bookingDeliveries bounds the relay deliveries on a timeline, as the CLI's history bounds them.
const bookingDeliveries = 1000

type inboxData struct {
	Groups   []itemGroup
	Total    int
	Resolved string
	// ResolvedKind is the kind of the item just resolved: a conflict's notice says the provider
	// still holds both bookings.
	ResolvedKind string
	// Failed are the process steps that gave up (no item: nothing is unknown about them, but someone
	// has to act); FailedMore says the list was cut at inboxFailed.
	Failed     []history.StepEntry
	FailedMore bool
	// Actions resolve step items (none: this server resolves no steps).
	Actions []string
}

type itemGroup struct {
	Kind  calendar.ItemKind
	Items []itemView
}

type itemView struct {
	calendar.Item
	Age string
}

func (s *server) inbox(w http.ResponseWriter, r *http.Request) {
	items, err := s.Reader.OpenItems(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.Clock()
	d := inboxData{Total: len(items), Resolved: r.URL.Query().Get("resolved")}
	if k := r.URL.Query().Get("kind"); slices.Contains([]calendar.ItemKind{calendar.ItemConflict, calendar.ItemLateEvent,
		calendar.ItemQuarantined, calendar.ItemStep}, calendar.ItemKind(k)) {
		d.ResolvedKind = k
	}
	if s.FailedSteps != nil {
		failed, err := s.FailedSteps(r.Context())
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if len(failed) > inboxFailed {
			failed, d.FailedMore = failed[:inboxFailed], true
		}
		d.Failed = failed
		d.Total += len(failed)
	}
	if s.Steps != nil {
		d.Actions = s.StepActions
	}
	for _, kind := range []calendar.ItemKind{calendar.ItemConflict, calendar.ItemLateEvent, calendar.ItemQuarantined, calendar.ItemStep, calendar.ItemSync} {
		g := itemGroup{Kind: kind}
		for _, it := range items {
			if it.Kind == kind {
				g.Items = append(g.Items, itemView{Item: it, Age: age(now.Sub(it.OpenedAt))})
			}
		}
		if len(g.Items) > 0 {
			d.Groups = append(d.Groups, g)
		}
	}
	s.render(w, r, http.StatusOK, "inbox", "Inbox", d)
}

func (s *server) resolve(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.fail(w, r, errBadRequestf("not a reconciliation item id"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	note, action := r.PostFormValue("note"), r.PostFormValue("action")
	var it calendar.Item
	switch {
	case action == "":
		it, err = s.Reader.Resolve(r.Context(), id, note, auth.Actor(r))
	case s.Steps == nil:
		err = errBadRequestf("this server resolves no process steps")
	default:
		it, err = s.Steps.ResolveStep(r.Context(), id, action, note, auth.Actor(r))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	to := "/ui/reconciliation?resolved=" + strconv.FormatInt(id, 10)
	if it.Kind != "" {
		to += "&kind=" + url.QueryEscape(string(it.Kind))
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

type deliveriesData struct {
	Provider, Outcome string
	Providers         []string
	Outcomes          []ledger.Outcome
	Rows              []Delivery
	Next              string
}

const deliveriesPage = 100

func (s *server) deliveries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := deliveriesData{Provider: q.Get("provider"), Outcome: q.Get("outcome"), Providers: s.Providers, Outcomes: outcomes}
	if d.Provider != "" && !slices.Contains(s.Providers, d.Provider) {
		s.fail(w, r, errBadRequestf("unknown provider "+strconv.Quote(d.Provider)))
		return
	}
	if d.Outcome != "" && !slices.Contains(outcomes, ledger.Outcome(d.Outcome)) {
		s.fail(w, r, errBadRequestf("unknown outcome "+strconv.Quote(d.Outcome)))
		return
	}
	var before int64
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			s.fail(w, r, errBadRequestf("before must be a receipt id"))
			return
		}
		before = n
	}
	rows, err := s.Deliveries(r.Context(), DeliveryQuery{Provider: d.Provider, Outcome: d.Outcome, BeforeID: before, Limit: deliveriesPage + 1})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(rows) > deliveriesPage {
		rows = rows[:deliveriesPage]
		next := url.Values{"before": {strconv.FormatInt(rows[len(rows)-1].ID, 10)}}
		if d.Provider != "" {
			next.Set("provider", d.Provider)
		}
		if d.Outcome != "" {
			next.Set("outcome", d.Outcome)
		}
		d.Next = "/ui/deliveries?" + next.Encode()
	}
	d.Rows = rows
	s.render(w, r, http.StatusOK, "deliveries", "Received", d)
}

func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + " min"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + " h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + " days"
}
