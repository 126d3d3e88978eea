package erasureapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/httpapi/auth"
	"bookingledger/adapters/httpapi/erasureapi"
	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/adapters/postgres/tokens"
	"bookingledger/adapters/privacy"
	"bookingledger/adapters/providers"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

const masterKey = "a:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// server is the erasure routes on the admin surface's policy over a fresh database, with the ledger
// that fills it and an admin token named ops-alice.
type server struct {
	url, token string
	svc        *ledger.Service
}

func newServer(t *testing.T) *server {
	t.Helper()
	pool := pgtest.NewDatabase(t)
	ring, err := privacy.ParseKeyring(masterKey)
	require.NoError(t, err)
	bodies := privacy.NewBodies(pool, ring)
	store := tokens.New(pool)
	a, err := auth.New(auth.Config{Store: store})
	require.NoError(t, err)
	routes := auth.NewRoutes()
	erasureapi.Register(routes, erasureapi.Deps{Eraser: privacy.NewEraser(pool, bodies, privacy.Owners{Receipts: postgres.NewStore(pool), Contacts: postgres.NewStore(pool),
		Steps: stepstore.EraseSteps, CalendarRows: readmodel.EraseCancelReasons}), Actor: auth.Actor})
	srv := httptest.NewServer(a.Handler(routes))
	t.Cleanup(srv.Close)
	secret, tk, err := auth.NewToken("ops-alice", auth.ScopeAdmin, time.Now(), time.Hour)
	require.NoError(t, err)
	require.NoError(t, store.Create(context.Background(), tk))
	return &server{url: srv.URL, token: secret,
		svc: ledger.NewService(postgres.NewStore(pool).WithBodySealer(bodies), eventcodec.JSON{})}
}

// book records the creation of booking b, whose invitee has the address email.
func (s *server) book(t *testing.T, b booking.ID, email string) {
	t.Helper()
	start := time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
	_, err := s.svc.Record(context.Background(), ledger.Delivery{
		Receipt: ledger.Receipt{Provider: "calendly", ReceivedAt: start.Add(-time.Hour), DeliveryID: string(b), Body: []byte(`{"email":"` + email + `"}`)},
		Events: []booking.Event{{ID: eventlog.EventID(providers.EventID("calendly", string(b))), Booking: b, Provider: "calendly",
			ProviderRef: string(b), OccurredAt: start.Add(-time.Hour), Payload: booking.Scheduled{
				Slot: booking.Slot{Meeting: "m", Resources: []string{"host"}, Start: start, End: start.Add(30 * time.Minute)}, Capacity: 1}}},
		Contacts: []ledger.Contact{{Booking: b, Email: email, Name: "Someone"}}})
	require.NoError(t, err)
}

func (s *server) do(t *testing.T, method, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+"/api/admin/erasures", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// The statuses of docs/api.md's erasure table: 201 for a recorded erasure (who asked is the token's
// name), 200 for a dry run and for an erasure that found nothing left, 404 for an address no contact
// has, 400 for a request that is not one of the two forms; the list is newest first, [] when empty.
func TestErasureAnswersWithItsStatuses(t *testing.T) {
	s := newServer(t)
	status, body := s.do(t, "GET", "")
	require.Equal(t, http.StatusOK, status, body)
	assert.JSONEq(t, `{"erasures":[]}`, body)

	s.book(t, "calendly-api1", "ada@example.com")
	s.book(t, "calendly-api2", "bob@example.com")
	for _, bad := range []string{`{}`, ``, `{"email":"ada@example.com","booking":"calendly-api1"}`, `{"email":"ada@example.com","bookings":["x"]}`,
		`{"email":`, `{"email":"ada@example.com"} {"email":"bob@example.com"}`} {
		status, body := s.do(t, "POST", bad)
		assert.Equal(t, http.StatusBadRequest, status, "%.80s: %s", bad, body)
		var e readapi.ErrorDTO
		if assert.NoError(t, json.Unmarshal([]byte(body), &e), body) {
			assert.Equal(t, "invalid_request", e.Code, "%.80s", bad)
		}
	}
	status, body = s.do(t, "POST", `{"email":"`+strings.Repeat("a", 9<<10)+`@example.com"}`)
	assert.Equal(t, http.StatusRequestEntityTooLarge, status, body)
	assert.Contains(t, body, `"code":"body_too_large"`)
	status, body = s.do(t, "POST", `{"email":"nobody@example.com"}`)
	assert.Equal(t, http.StatusNotFound, status, body)
	assert.Contains(t, body, `"code":"not_found"`)

	status, body = s.do(t, "POST", `{"email":"ADA@example.com","dry_run":true}`)
	require.Equal(t, http.StatusOK, status, body)
	var dry privacy.Erasure
	require.NoError(t, json.Unmarshal([]byte(body), &dry))
	assert.True(t, dry.DryRun)
	assert.Zero(t, dry.ID, "a dry run records nothing")

	status, body = s.do(t, "POST", `{"email":"ada@example.com"}`)
	require.Equal(t, http.StatusCreated, status, body)
	var first privacy.Erasure
	require.NoError(t, json.Unmarshal([]byte(body), &first))
	assert.Positive(t, first.ID)
	assert.Equal(t, "token ops-alice", first.By)
	assert.Equal(t, []string{"calendly-api1"}, first.Bookings)
	assert.Equal(t, dry.Counts, first.Counts)
	assert.NotContains(t, body, "ada@example.com", "the answer never echoes the address")

	status, body = s.do(t, "POST", `{"booking":"calendly-api1"}`)
	require.Equal(t, http.StatusOK, status, "erased before, nothing left: %s", body)
	assert.NotContains(t, body, `"id"`)
	status, body = s.do(t, "POST", `{"booking":"calendly-api2"}`)
	require.Equal(t, http.StatusCreated, status, body)

	status, body = s.do(t, "GET", "")
	require.Equal(t, http.StatusOK, status, body)
	var list erasureapi.ListDTO
	require.NoError(t, json.Unmarshal([]byte(body), &list))
	require.Len(t, list.Erasures, 2)
	assert.Equal(t, []string{"calendly-api2"}, list.Erasures[0].Bookings, "newest first")
	assert.Equal(t, first.ID, list.Erasures[1].ID)
}
