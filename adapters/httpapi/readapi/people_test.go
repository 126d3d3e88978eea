package readapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/domain/booking"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
)

// fakePeople keeps one contact and finds bookings whose id or name is the text.
type fakePeople struct{ asked []string }

var ada = calendar.Contact{Booking: "calendly-b1", Name: "Ada Lovelace", Email: "ada@example.com"}

func (f *fakePeople) Contacts(_ context.Context, ids []booking.ID) (map[booking.ID]calendar.Contact, error) {
	out := map[booking.ID]calendar.Contact{}
	for _, id := range ids {
		if id == ada.Booking {
			out[id] = ada
		}
	}
	return out, nil
}

func (f *fakePeople) Search(_ context.Context, text string, limit int) ([]calendar.SearchHit, error) {
	f.asked = append(f.asked, fmt.Sprintf("%q %d", text, limit))
	switch text {
	case "":
		return nil, fmt.Errorf("%w: search text must be 1 to 200 bytes", projections.ErrInvalidQuery)
	case "Ada":
		return []calendar.SearchHit{{Booking: calendar.Booking{Booking: "calendly-b1", Status: calendar.StatusActive}, Contact: ada},
			{Booking: calendar.Booking{Booking: "calendly-b2", Status: calendar.StatusCanceled}}}, nil
	}
	return nil, nil
}

// TestContactAndSearchRoutes: a booking's contact (404 when none is kept), and the search with each
// hit's booking and contact (none when none is kept); a bad text is a 400; without People both 404.
func TestContactAndSearchRoutes(t *testing.T) {
	people := &fakePeople{}
	mux := http.NewServeMux()
	readapi.Register(mux, readapi.Deps{Reader: &fakeReader{}, People: people})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	status, body := call(t, srv, http.MethodGet, "/api/bookings/calendly-b1/contact", "")
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, map[string]any{"booking": "calendly-b1", "name": "Ada Lovelace", "email": "ada@example.com"}, body)
	status, body = call(t, srv, http.MethodGet, "/api/bookings/calendly-b2/contact", "")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "not_found", body["code"])
	status, _ = call(t, srv, http.MethodGet, "/api/bookings/not%20an%20id/contact", "")
	assert.Equal(t, http.StatusBadRequest, status)

	status, body = call(t, srv, http.MethodGet, "/api/search?q=Ada", "")
	require.Equal(t, http.StatusOK, status, body)
	results := body["results"].([]any)
	require.Len(t, results, 2)
	first, second := results[0].(map[string]any), results[1].(map[string]any)
	assert.Equal(t, "calendly-b1", first["booking"].(map[string]any)["booking"])
	assert.Equal(t, "Ada Lovelace", first["contact"].(map[string]any)["name"])
	assert.Equal(t, "canceled", second["booking"].(map[string]any)["status"])
	assert.NotContains(t, second, "contact", "no contact kept: none shown")
	assert.Equal(t, []string{`"Ada" 50`}, people.asked)

	status, body = call(t, srv, http.MethodGet, "/api/search?q=Grace", "")
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, []any{}, body["results"], "an empty list, not null")
	status, body = call(t, srv, http.MethodGet, "/api/search", "")
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "invalid_request", body["code"])

	bare := serve(t, &fakeReader{})
	for _, path := range []string{"/api/search?q=Ada", "/api/bookings/calendly-b1/contact"} {
		status, _ := call(t, bare, http.MethodGet, path, "")
		assert.Equal(t, http.StatusNotFound, status, path)
	}
}
