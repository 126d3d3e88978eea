package ui

import (
	"net/http"
	"strings"

	"bookingledger/projections/calendar"
)

type searchData struct {
	Query string
	Hits  []calendar.SearchHit
	// Asked: a search was made (the page without ?q= only shows the box).
	Asked bool
}

// search finds bookings by id or by the invitee's name or email address (the contacts table's,
// as GET /api/search does).
func (s *server) search(w http.ResponseWriter, r *http.Request) {
	if s.People == nil {
		s.render(w, r, http.StatusNotFound, "error", "Not found", errorData{Message: "Search needs the contacts table; this server has none."})
		return
	}
	d := searchData{Query: strings.TrimSpace(r.URL.Query().Get("q"))}
	if d.Query != "" {
		if len(d.Query) > calendar.MaxSearchText {
			s.fail(w, r, errBadRequestf("search for at most 200 bytes"))
			return
		}
		hits, err := s.People.Search(r.Context(), d.Query, calendar.MaxSearch)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		d.Hits, d.Asked = hits, true
	}
	s.render(w, r, http.StatusOK, "search", "Search", d)
}
