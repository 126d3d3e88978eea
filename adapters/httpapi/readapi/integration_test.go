package readapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
)

// TestReadAPIOverPostgres wires the handlers to the real read model: deliveries through the ledger,
// the projection, then the HTTP answers.
func TestReadAPIOverPostgres(t *testing.T) {
	pool := pgtest.NewDatabase(t)
	store := postgres.NewStore(pool)
	svc := ledger.NewService(store, eventcodec.JSON{})
	rm := readmodel.New(pool, store, eventcodec.JSON{}, readmodel.Options{})
	ctx := context.Background()

	ns := uuid.MustParse("0b4c7a1e-5d2f-4e8a-9c3b-7f6e5d4c3b2a")
	ev := func(b booking.ID, ref string, at time.Time, p booking.Payload) booking.Event {
		return booking.Event{ID: eventlog.EventID(uuid.NewSHA1(ns, []byte(string(b)+ref))), Booking: b, Provider: "calendly",
			ProviderRef: string(b) + " " + ref, OccurredAt: at, Payload: p}
	}
	slot := func(m string, start time.Time) booking.Slot {
		return booking.Slot{Meeting: m, Resources: []string{"host-1"}, Start: start, End: start.Add(time.Hour)}
	}
	deliver := func(id string, e booking.Event) {
		_, err := svc.Record(ctx, ledger.Delivery{Receipt: ledger.Receipt{Provider: "calendly", ReceivedAt: t0, DeliveryID: id,
			Secret: "0:ab12", Body: []byte(`{}`)}, Events: []booking.Event{e}})
		require.NoError(t, err)
	}
	deliver("d-1", ev("calendly-first", "created", t0.Add(-48*time.Hour), booking.Scheduled{Slot: slot("m1", t0)}))
	deliver("d-2", ev("calendly-second", "created", t0.Add(-24*time.Hour), booking.Scheduled{Slot: slot("m2", t0.Add(30*time.Minute))}))
	deliver("d-2", ev("calendly-second", "created", t0.Add(-24*time.Hour), booking.Scheduled{Slot: slot("m2", t0.Add(30*time.Minute))}))
	require.Eventually(t, func() bool {
		_, err := projections.NewRunner(store, rm, checkpoint.NewLocker(pool), projections.RunnerOptions{Bulk: rm}).CatchUp(ctx)
		require.NoError(t, err)
		cp, err := checkpoint.Read(ctx, pool, readmodel.ProjectionName)
		require.NoError(t, err)
		return cp.EventsApplied == 2
	}, time.Minute, 5*time.Millisecond)

	srv := serve(t, rm)
	status, body := call(t, srv, "GET", "/api/calendar?from=2027-03-15T00:00:00Z&to=2027-03-16T00:00:00Z&resource=host-1", "")
	require.Equal(t, 200, status)
	entries := body["bookings"].([]any)
	require.Len(t, entries, 2)
	assert.Equal(t, "active", entries[0].(map[string]any)["status"])
	assert.Equal(t, "conflict", entries[1].(map[string]any)["status"])

	status, body = call(t, srv, "GET", "/api/bookings/calendly-second/history", "")
	require.Equal(t, 200, status)
	assert.Equal(t, "conflict", body["state"].(map[string]any)["status"])
	assert.Len(t, body["receipts"], 2)
	kinds := map[string]bool{}
	for _, f := range body["findings"].([]any) {
		kinds[f.(map[string]any)["kind"].(string)] = true
	}
	assert.True(t, kinds["duplicate_delivery"])
	assert.True(t, kinds["conflict"])

	status, body = call(t, srv, "GET", "/api/reconciliation", "")
	require.Equal(t, 200, status)
	items := body["items"].([]any)
	require.Len(t, items, 1)
	id := int64(items[0].(map[string]any)["id"].(float64))

	status, _ = call(t, srv, "POST", "/api/reconciliation/"+itoa(id)+"/resolve", `{"note":"host confirmed both"}`)
	assert.Equal(t, 200, status)
	status, body = call(t, srv, "POST", "/api/reconciliation/"+itoa(id)+"/resolve", `{"note":"again"}`)
	assert.Equal(t, 409, status)
	status, _ = call(t, srv, "POST", "/api/reconciliation/999999/resolve", `{"note":"x"}`)
	assert.Equal(t, 404, status)
	status, _ = call(t, srv, "GET", "/api/bookings/calendly-nobody", "")
	assert.Equal(t, 404, status)

	// The CLI's --json output is the HTTP shape.
	h, err := rm.History(ctx, "calendly-second")
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, readapi.WriteHistoryJSON(&buf, h))
	var cli map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &cli))
	for _, k := range []string{"booking", "state", "receipts", "events", "findings", "fold_order"} {
		assert.Contains(t, cli, k)
	}
}

// Text a PostgreSQL text value cannot hold (NUL, bytes that are not UTF-8) in a parameter, a path, a
// cursor or a note is a 400 with the documented code; passed to the query it answered 500 internal.
func TestReadAPIRefusesTextNoQueryCanTake(t *testing.T) {
	pool := pgtest.NewDatabase(t)
	store := postgres.NewStore(pool)
	rm := readmodel.New(pool, store, eventcodec.JSON{}, readmodel.Options{})
	srv := serve(t, rm)
	const day = "from=2027-03-15T00:00:00Z&to=2027-03-16T00:00:00Z"
	cursor := func(resource, booking string) string {
		b, err := json.Marshal([]string{"2027-03-15T00:00:00Z", resource, booking})
		require.NoError(t, err)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	for _, tc := range []struct{ path, code string }{
		{"/api/calendar?" + day + "&resource=a%00b", "invalid_request"},
		{"/api/calendar?" + day + "&resource=a%FFb", "invalid_request"},
		{"/api/calendar?" + day + "&cursor=" + cursor("a\u0000b", "calendly-x"), "invalid_request"},
		{"/api/calendar?" + day + "&cursor=" + cursor("host-1", "calendly-a\u0000b"), "invalid_request"},
		{"/api/bookings/calendly-a%00b", "invalid_booking_id"},
		{"/api/bookings/calendly-a%FFb/history", "invalid_booking_id"},
	} {
		status, body := call(t, srv, "GET", tc.path, "")
		assert.Equal(t, 400, status, "%s: %v", tc.path, body)
		assert.Equal(t, tc.code, body["code"], tc.path)
	}
	// A cursor this server did issue still pages.
	status, body := call(t, srv, "GET", "/api/calendar?"+day+"&cursor="+cursor("host-1", "calendly-x"), "")
	assert.Equal(t, 200, status, "%v", body)

	status, body = call(t, srv, "POST", "/api/reconciliation/1/resolve", `{"note":"a\u0000b"}`)
	assert.Equal(t, 400, status, "%v", body)
	assert.Equal(t, "invalid_request", body["code"])
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// The receipts' filters and a resolution's item are checked before any query: a provider of over
// 512 bytes or one PostgreSQL's text cannot hold, a limit that is not a positive integer, an item id
// that is not positive, and a step's action on a server that resolves no steps each answer 400
// invalid_request. Filters within the bounds answer.
func TestReceiptFiltersAndResolutionsAreChecked(t *testing.T) {
	pool := pgtest.NewDatabase(t)
	rm := readmodel.New(pool, postgres.NewStore(pool), eventcodec.JSON{}, readmodel.Options{})
	mux := http.NewServeMux()
	readapi.Register(mux, readapi.Deps{Reader: rm, Receipts: rm, Actor: func(*http.Request) string { return "front-desk" }})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/api/receipts?provider=a%00b", ""},
		{"GET", "/api/receipts?provider=a%FFb", ""},
		{"GET", "/api/receipts?provider=" + strings.Repeat("p", 513), ""},
		{"GET", "/api/receipts?limit=0", ""},
		{"GET", "/api/receipts?limit=ten", ""},
		{"POST", "/api/reconciliation/0/resolve", `{"note":"x"}`},
		{"POST", "/api/reconciliation/1/resolve", `{"note":"x","action":"retry"}`},
	} {
		status, body := call(t, srv, tc.method, tc.path, tc.body)
		assert.Equal(t, http.StatusBadRequest, status, "%s %s: %v", tc.method, tc.path, body)
		assert.Equal(t, "invalid_request", body["code"], "%s %s", tc.method, tc.path)
	}
	status, body := call(t, srv, "GET", "/api/receipts?provider="+strings.Repeat("p", 512)+"&limit=1", "")
	assert.Equal(t, http.StatusOK, status, "%v", body)
}
