package ui

import (
	"cmp"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"bookingledger/adapters/relay"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/projections"
)

var funcs = template.FuncMap{
	"stamp": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000Z")
	},
	"hm": func(t time.Time) string { return t.UTC().Format("15:04") },
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
	projections.CalendarEntry
	// Holder: an active booking holding a slot that a conflict on the same resource wanted.
	Holder bool
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
	day := s.Clock().UTC().Truncate(24 * time.Hour)
	if v := q.Get("date"); v != "" {
		d, err := time.Parse(time.DateOnly, v)
		if err != nil {
			s.fail(w, r, errBadRequestf("date must look like 2026-12-01"))
			return
		}
		day = d
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
	var entries []projections.CalendarEntry
	cq := projections.CalendarQuery{From: from, To: to, Resource: resource, Limit: projections.MaxCalendarPage}
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
	d := calendarData{View: view, Date: day.Format(time.DateOnly), Resource: resource, Truncated: truncated, Count: len(entries)}
	for i := range n {
		d.Days = append(d.Days, day.AddDate(0, 0, i))
	}
	link := func(date time.Time, v string) string {
		u := url.Values{"date": {date.Format(time.DateOnly)}, "view": {v}}
		if resource != "" {
			u.Set("resource", resource)
		}
		return "/ui/calendar?" + u.Encode()
	}
	d.Prev, d.Next = link(day.AddDate(0, 0, -n), view), link(day.AddDate(0, 0, n), view)
	d.Today = link(s.Clock().UTC().Truncate(24*time.Hour), view)
	d.Week, d.Day = link(day, "week"), link(day, "day")
	d.Rows = grid(entries, d.Days)
	s.render(w, r, http.StatusOK, "calendar", "Calendar", d)
}

func errBadRequestf(msg string) error { return &badRequest{msg} }

type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }
func (e *badRequest) Unwrap() error { return errBadRequest }

// grid places each entry in the day columns its slot overlaps and marks the holders of slots that
// conflicts wanted: an active entry overlapping a conflict entry on the same (canonical) resource.
func grid(entries []projections.CalendarEntry, days []time.Time) []calendarRow {
	byRes := map[string][]projections.CalendarEntry{}
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
			if e.Status == projections.StatusActive {
				for _, o := range es {
					if o.Status == projections.StatusConflict && o.Start.Before(e.End) && e.Start.Before(o.End) {
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
	projections.History
	// Fold lists the events in fold order.
	Fold []projections.HistoryEvent
	// Payments are the booking's payment streams (their own timelines).
	Payments []booking.ID
	// Deliveries are the booking's relay deliveries to every endpoint, newest first; Relay says the
	// server runs a relay at all.
	Deliveries []relay.Delivery
	Relay      bool
}

func newTimeline(h projections.History) timeline {
	t := timeline{History: h, Payments: h.State.PaymentStreams}
	byID := map[eventlog.EventID]projections.HistoryEvent{}
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
