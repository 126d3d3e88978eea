package readapi

import (
	"context"
	"fmt"
	"net/http"

	"bookingledger/domain/booking"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
)

// PeopleReader reads invitees from the erasable contacts table (readmodel.ReadModel implements it):
// the only source of names and email addresses, never the events, and empty for an erased person.
type PeopleReader interface {
	Contacts(ctx context.Context, ids []booking.ID) (map[booking.ID]calendar.Contact, error)
	Search(ctx context.Context, text string, limit int) ([]calendar.SearchHit, error)
}

// ContactDTO is a booking's invitee.
type ContactDTO struct {
	Booking string `json:"booking"`
	Name    string `json:"name"`
	Email   string `json:"email"`
}

// SearchHitDTO is a booking found by GET /api/search, with its invitee (absent when none is kept).
type SearchHitDTO struct {
	Booking BookingDTO  `json:"booking"`
	Contact *ContactDTO `json:"contact,omitempty"`
}

// SearchDTO is GET /api/search's answer.
type SearchDTO struct {
	Results []SearchHitDTO `json:"results"`
}

// errNoPeople answers the people routes of a read API built without a PeopleReader.
var errNoPeople = fmt.Errorf("contacts are not served here: %w", projections.ErrNotFound)

func (h *handlers) contact(w http.ResponseWriter, r *http.Request) {
	id, ok := bookingParam(w, r)
	if !ok {
		return
	}
	if h.people == nil {
		h.fail(w, r, errNoPeople)
		return
	}
	cs, err := h.people.Contacts(r.Context(), []booking.ID{id})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	c, ok := cs[id]
	if !ok {
		h.fail(w, r, fmt.Errorf("no contact kept for booking %s (none sent, or erased): %w", id, projections.ErrNotFound))
		return
	}
	writeJSON(w, http.StatusOK, ContactDTO{Booking: string(c.Booking), Name: c.Name, Email: c.Email})
}

func (h *handlers) search(w http.ResponseWriter, r *http.Request) {
	if h.people == nil {
		h.fail(w, r, errNoPeople)
		return
	}
	hits, err := h.people.Search(r.Context(), r.URL.Query().Get("q"), calendar.MaxSearch)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := SearchDTO{Results: make([]SearchHitDTO, len(hits))}
	for i, hit := range hits {
		out.Results[i].Booking = toBooking(hit.Booking)
		if hit.Contact != (calendar.Contact{}) {
			out.Results[i].Contact = &ContactDTO{Booking: string(hit.Contact.Booking), Name: hit.Contact.Name, Email: hit.Contact.Email}
		}
	}
	writeJSON(w, http.StatusOK, out)
}
