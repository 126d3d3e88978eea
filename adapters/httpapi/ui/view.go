package ui

import (
	"cmp"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"bookingledger/adapters/relay"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/projections/calendar"
	"bookingledger/projections/history"
)

// funcs are the templates' helpers; the time formats are zoneFuncs', bound to each request's zone.
var funcs = template.FuncMap{
	"host":     hostName,
	"provider": providerName,
	// bookingURL takes a booking.ID or the plain string the relay and the steps carry.
	"bookingURL":  func(id any) string { return "/ui/bookings/" + url.PathEscape(fmt.Sprint(id)) },
	"add":         func(a, b int) int { return a + b },
	"ms":          func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) + " ms" },
	"endpointURL": func(id int64) string { return endpointsPath + "/" + strconv.FormatInt(id, 10) },
	"short": func(id eventlog.EventID) string {
		s := id.String()
		if len(s) > 8 {
			return s[:8]
		}
		return s
	},
}

// calendarData is the grid: one row per resource, one column per day.
type calendarData struct {
	View, Date, Resource string
	Days                 []time.Time
	Rows                 []calendarRow
	Prev, Next, Today    string
	Truncated            bool
	Count                int
	Week, Day            string
}

type calendarRow struct {
	Resource string
	Cells    [][]calendarCell
}

type calendarCell struct {
	calendar.CalendarEntry
	// Holder: an active booking holding a slot that a conflict on the same resource wanted.
	Holder bool
	// Invitee is the name (else the email address) the contacts table keeps for the booking; empty
	// when none is kept (erased, or the provider sent none).
	Invitee string
}

// hostName is how a page names a resource: a linked resource's name as it is, a provider's URI by
// its last part (Calendly's https://api.calendly.com/users/AAAA-BBBB is "AAAA-BBBB"); the full
// identifier stays in the element's title.
func hostName(resource string) string {
	if !strings.Contains(resource, "://") {
		return resource
	}
	u, err := url.Parse(resource)
	if err != nil {
		return resource
	}
	if last := path.Base(strings.TrimSuffix(u.Path, "/")); last != "" && last != "." && last != "/" {
		return last
	}
	return u.Host
}

// invitee is how a card names a booking's invitee: the name, else the email address.
func invitee(c calendar.Contact) string {
	if c.Name != "" {
		return c.Name
	}
	return c.Email
}

func (s *server) calendar(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	view := q.Get("view")
	if view == "" {
		view = "week"
	}
	if view != "week" && view != "day" {
		s.fail(w, r, errBadRequestf("view must be day or week"))
		return
	}
	loc := zoneOf(r)
	midnight := func(t time.Time) time.Time {
		t = t.In(loc)
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	}
	today := midnight(s.Clock())
	day := today
	if v := q.Get("date"); v != "" {
		d, err := time.ParseInLocation(time.DateOnly, v, loc)
		if err != nil {
			s.fail(w, r, errBadRequestf("date must look like 2026-12-01"))
			return
		}
		day = d
	}
	// ?week= is the week (Monday to Sunday) that holds the date: what a link to "that week" means.
	if v := q.Get("week"); v != "" {
		d, err := time.ParseInLocation(time.DateOnly, v, loc)
		if err != nil {
			s.fail(w, r, errBadRequestf("week must be a date like 2026-12-01"))
			return
		}
		day, view = d.AddDate(0, 0, -((int(d.Weekday())+6)%7)), "week"
	}
	resource := q.Get("resource")
	if len(resource) > 512 {
		s.fail(w, r, errBadRequestf("resource is too long"))
		return
	}
	n := 7
	if view == "day" {
		n = 1
	}
	from, to := day, day.AddDate(0, 0, n)
	var entries []calendar.CalendarEntry
	cq := calendar.CalendarQuery{From: from, To: to, Resource: resource, Limit: calendar.MaxCalendarPage}
	truncated := false
	for {
		p, err := s.Reader.Calendar(r.Context(), cq)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		entries = append(entries, p.Entries...)
		next := p.Next()
		if next == nil {
			break
		}
		if len(entries) >= maxCalendarEntries {
			truncated = true
			break
		}
		cq.After = next
	}
	names, err := s.invitees(r, entries)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := calendarData{View: view, Date: day.Format(time.DateOnly), Resource: resource, Truncated: truncated, Count: len(entries)}
	for i := range n {
		d.Days = append(d.Days, day.AddDate(0, 0, i))
	}
	link := func(date time.Time, v string) string {
		u := url.Values{"date": {date.Format(time.DateOnly)}, "view": {v}}
		if resource != "" {
			u.Set("resource", resource)
		}
		if _, ok := loadZone(q.Get("tz")); ok {
			u.Set("tz", q.Get("tz")) // a link given in a zone stays in it
		}
		return "/ui/calendar?" + u.Encode()
	}
	d.Prev, d.Next = link(day.AddDate(0, 0, -n), view), link(day.AddDate(0, 0, n), view)
	d.Today = link(today, view)
	d.Week, d.Day = link(day, "week"), link(day, "day")
	d.Rows = grid(entries, d.Days)
	for _, row := range d.Rows {
		for _, cell := range row.Cells {
			for i := range cell {
				cell[i].Invitee = names[cell[i].Booking]
			}
		}
	}
	s.render(w, r, http.StatusOK, "calendar", "Calendar", d)
}

// invitees names the entries' invitees from the contacts table (none without People).
func (s *server) invitees(r *http.Request, entries []calendar.CalendarEntry) (map[booking.ID]string, error) {
	names := map[booking.ID]string{}
	if s.People == nil || len(entries) == 0 {
		return names, nil
	}
	ids := make([]booking.ID, 0, len(entries))
	for _, e := range entries {
		ids = append(ids, e.Booking)
	}
	cs, err := s.People.Contacts(r.Context(), ids)
	if err != nil {
		return nil, err
	}
	for id, c := range cs {
		names[id] = invitee(c)
	}
	return names, nil
}

func errBadRequestf(msg string) error { return &badRequest{msg} }

type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }
func (e *badRequest) Unwrap() error { return errBadRequest }

// grid places each entry in the day columns its slot overlaps and marks the holders of slots that
// conflicts wanted: an active entry overlapping a conflict entry on the same (canonical) resource.
func grid(entries []calendar.CalendarEntry, days []time.Time) []calendarRow {
	byRes := map[string][]calendar.CalendarEntry{}
	for _, e := range entries {
		// One row per canonical resource: a host's calendars at several providers are one row, as they
		// are one calendar to the slot-holder rule.
		key := e.Canonical
		if key == "" {
			key = e.Resource
		}
		byRes[key] = append(byRes[key], e)
	}
	var rows []calendarRow
	for res, es := range byRes {
		row := calendarRow{Resource: res, Cells: make([][]calendarCell, len(days))}
		for _, e := range es {
			holder := false
			if e.Status == calendar.StatusActive {
				for _, o := range es {
					if o.Status == calendar.StatusConflict && o.Start.Before(e.End) && e.Start.Before(o.End) {
						holder = true
						break
					}
				}
			}
			for i, d := range days {
				if e.Start.Before(d.AddDate(0, 0, 1)) && d.Before(e.End) {
					row.Cells[i] = append(row.Cells[i], calendarCell{CalendarEntry: e, Holder: holder})
				}
			}
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b calendarRow) int { return cmp.Compare(a.Resource, b.Resource) })
	return rows
}

// timeline is a booking's history arranged for the page.
type timeline struct {
	history.History
	// Fold lists the events in fold order.
	Fold []history.HistoryEvent
	// Payments are the booking's payment streams (their own timelines).
	Payments []booking.ID
	// Deliveries are the booking's relay deliveries to every endpoint, newest first; Relay says the
	// server runs a relay at all.
	Deliveries []relay.Delivery
	Relay      bool
	// Contact is the invitee the contacts table keeps (zero: none, or erased); People says the
	// server reads the table at all.
	Contact calendar.Contact
	People  bool
	// Story is the booking told in plain language, oldest first.
	Story []storyLine
	// Conflicts are the bookings holding the slot this one wants (its conflict findings).
	Conflicts []booking.ID
}

func newTimeline(h history.History) timeline {
	t := timeline{History: h, Payments: h.State.PaymentStreams}
	for _, f := range h.Findings {
		if f.Kind == history.FindingConflict && f.OtherBooking != "" && !slices.Contains(t.Conflicts, f.OtherBooking) {
			t.Conflicts = append(t.Conflicts, f.OtherBooking)
		}
	}
	byID := map[eventlog.EventID]history.HistoryEvent{}
	for _, e := range h.Events {
		byID[e.ID] = e
	}
	for _, id := range h.FoldOrder {
		if e, ok := byID[id]; ok {
			t.Fold = append(t.Fold, e)
		}
	}
	return t
}
