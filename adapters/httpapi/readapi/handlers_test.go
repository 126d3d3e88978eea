package readapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
	"bookingledger/projections/history"
)

var t0 = time.Date(2027, 3, 15, 10, 0, 0, 0, time.UTC)

// fakeReader answers from fixed data and records what it was asked.
type fakeReader struct {
	bookings   map[booking.ID]calendar.Booking
	items      []calendar.Item
	lastQuery  calendar.CalendarQuery
	resolveErr error
	failAll    error
}

func (f *fakeReader) Booking(_ context.Context, id booking.ID) (calendar.Booking, error) {
	if f.failAll != nil {
		return calendar.Booking{}, f.failAll
	}
	b, ok := f.bookings[id]
	if !ok {
		return calendar.Booking{}, fmt.Errorf("booking %s: %w", id, projections.ErrNotFound)
	}
	return b, nil
}

func (f *fakeReader) History(ctx context.Context, id booking.ID) (history.History, error) {
	b, err := f.Booking(ctx, id)
	if err != nil {
		return history.History{}, err
	}
	ev := eventlog.EventID{1}
	return history.History{
		Booking: id, State: b, Projected: true,
		Receipts: []history.ReceiptEntry{{ID: 7, Provider: "calendly", ReceivedAt: t0, DeliveryID: "d-1", Secret: "0:ab12",
			Outcome: ledger.OutcomeDuplicate, Events: []ledger.EventRef{{Booking: id, ID: ev, Type: booking.TypeScheduled}}}},
		Events: []history.HistoryEvent{{Version: 1, FoldIndex: 1, ID: ev, Type: booking.TypeScheduled, Provider: "calendly",
			OccurredAt: t0, RecordedAt: t0, Applied: true, Effect: "applied", Summary: "scheduled"}},
		FoldOrder: []eventlog.EventID{ev},
		Findings:  []history.HistoryFinding{{Kind: history.FindingDuplicateDelivery, ReceiptID: 7, Reason: "dup"}},
	}, nil
}

func (f *fakeReader) Calendar(_ context.Context, q calendar.CalendarQuery) (calendar.CalendarPage, error) {
	f.lastQuery = q
	return calendar.CalendarPage{Entries: []calendar.CalendarEntry{{Booking: "calendly-a", Provider: "calendly", Meeting: "m",
		Resource: "host-1", Start: t0, End: t0.Add(30 * time.Minute), Status: calendar.StatusActive}}, More: q.Limit == 1}, nil
}

func (f *fakeReader) OpenItems(context.Context) ([]calendar.Item, error) { return f.items, nil }

func (f *fakeReader) Resolve(_ context.Context, id int64, note, by string) (calendar.Item, error) {
	if f.resolveErr != nil {
		return calendar.Item{}, f.resolveErr
	}
	return calendar.Item{ID: id, Kind: calendar.ItemConflict, Subject: "a b", Reason: "r", OpenedAt: t0,
		ClosedAt: t0.Add(time.Hour), ClosedBy: calendar.ClosedByOperator, Note: note, ResolvedBy: by}, nil
}

// serve mounts the handlers with an actor read from a test header (auth.Actor in production).
func serve(t *testing.T, r readapi.Reader) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	readapi.Register(mux, readapi.Deps{Reader: r, Actor: func(r *http.Request) string { return r.Header.Get("X-Test-Actor") }})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func call(t *testing.T, srv *httptest.Server, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if !strings.Contains(path, "anonymous") {
		req.Header.Set("X-Test-Actor", "front-desk")
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	if resp.Header.Get("Content-Type") == "application/json" {
		require.NoError(t, json.Unmarshal(raw, &out), "body %s", raw)
	}
	return resp.StatusCode, out
}

func TestHandlers(t *testing.T) {
	fr := &fakeReader{
		bookings: map[booking.ID]calendar.Booking{"calendly-a": {
			Booking: "calendly-a", Provider: "calendly", Meeting: "m", Resources: []string{"host-1"}, Start: t0, End: t0.Add(30 * time.Minute),
			Status: calendar.StatusActive, BookingStatus: booking.StatusActive, Holder: true, Payment: booking.PaymentIsPaid,
			PaymentRefs: []string{"stripe:ch_1"}, PaymentStreams: []booking.ID{"stripe-pi_1"}, ScheduledAt: t0.Add(-time.Hour), StreamVersion: 2, Events: 2,
		}},
		items: []calendar.Item{{ID: 3, Kind: calendar.ItemQuarantined, Subject: "receipt 9", ReceiptID: 9, Reason: "bad body", OpenedAt: t0}},
	}
	srv := serve(t, fr)
	long := strings.Repeat("x", 600)
	cases := []struct {
		name, method, path, body string
		status                   int
		check                    func(t *testing.T, body map[string]any)
	}{
		{"booking", "GET", "/api/bookings/calendly-a", "", 200, func(t *testing.T, b map[string]any) {
			assert.Equal(t, "calendly-a", b["booking"])
			assert.Equal(t, "active", b["status"])
			assert.Equal(t, true, b["holder"])
			assert.Equal(t, "2027-03-15T10:00:00Z", b["start"])
			assert.Equal(t, map[string]any{"status": "paid", "refs": []any{"stripe:ch_1"}, "streams": []any{"stripe-pi_1"}}, b["payment"])
		}},
		{"unknown booking", "GET", "/api/bookings/calendly-nobody", "", 404, func(t *testing.T, b map[string]any) {
			assert.Equal(t, "not_found", b["code"])
		}},
		{"invalid booking id", "GET", "/api/bookings/a%20b", "", 400, func(t *testing.T, b map[string]any) {
			assert.Equal(t, "invalid_booking_id", b["code"], "the code docs/api.md names")
		}},
		{"invalid booking id of a history", "GET", "/api/bookings/a%20b/history", "", 400, func(t *testing.T, b map[string]any) {
			assert.Equal(t, "invalid_booking_id", b["code"])
		}},
		{"history", "GET", "/api/bookings/calendly-a/history", "", 200, func(t *testing.T, b map[string]any) {
			for _, k := range []string{"booking", "state", "receipts", "events", "findings", "fold_order"} {
				assert.Contains(t, b, k)
			}
			rec := b["receipts"].([]any)[0].(map[string]any)
			assert.Equal(t, "d-1", rec["delivery_id"])
			assert.Equal(t, "0:ab12", rec["secret"])
			assert.Equal(t, "duplicate", rec["outcome"])
			assert.Equal(t, "duplicate_delivery", b["findings"].([]any)[0].(map[string]any)["kind"])
		}},
		{"history of unknown booking", "GET", "/api/bookings/calendly-nobody/history", "", 404, nil},
		{"calendar", "GET", "/api/calendar?from=2027-03-15T00:00:00Z&to=2027-03-16T00:00:00%2B01:00&resource=host-1", "", 200, func(t *testing.T, b map[string]any) {
			e := b["bookings"].([]any)[0].(map[string]any)
			assert.Equal(t, map[string]any{"booking": "calendly-a", "provider": "calendly", "meeting": "m", "resource": "host-1", "canonical_resource": "host-1",
				"start": "2027-03-15T10:00:00Z", "end": "2027-03-15T10:30:00Z", "status": "active"}, e)
			assert.Equal(t, "host-1", fr.lastQuery.Resource)
			assert.True(t, fr.lastQuery.To.Equal(time.Date(2027, 3, 15, 23, 0, 0, 0, time.UTC)))
			assert.Equal(t, false, b["has_more"])
			assert.NotContains(t, b, "next_cursor")
			assert.Nil(t, fr.lastQuery.After)
		}},
		{"calendar, a page that is not the last", "GET", "/api/calendar?from=2027-03-15T00:00:00Z&to=2027-03-16T00:00:00Z&limit=1", "", 200, func(t *testing.T, b map[string]any) {
			assert.Equal(t, true, b["has_more"])
			want := calendar.CalendarCursor{Start: t0, Resource: "host-1", Booking: "calendly-a"}
			assert.Equal(t, want.String(), b["next_cursor"])
		}},
		{"calendar, the next page", "GET", "/api/calendar?from=2027-03-15T00:00:00Z&to=2027-03-16T00:00:00Z&cursor=" +
			calendar.CalendarCursor{Start: t0, Resource: "host-1", Booking: "calendly-a"}.String(), "", 200, func(t *testing.T, b map[string]any) {
			require.NotNil(t, fr.lastQuery.After)
			assert.Equal(t, calendar.CalendarCursor{Start: t0, Resource: "host-1", Booking: "calendly-a"}, *fr.lastQuery.After)
		}},
		{"calendar with a forged cursor", "GET", "/api/calendar?from=2027-03-15T00:00:00Z&to=2027-03-16T00:00:00Z&cursor=abc", "", 400, func(t *testing.T, b map[string]any) {
			assert.Contains(t, b["error"], "cursor")
		}},
		{"calendar limit too large", "GET", "/api/calendar?from=2027-03-15T00:00:00Z&to=2027-03-16T00:00:00Z&limit=10001", "", 400, nil},
		{"calendar limit zero", "GET", "/api/calendar?from=2027-03-15T00:00:00Z&to=2027-03-16T00:00:00Z&limit=0", "", 400, nil},
		{"calendar without from", "GET", "/api/calendar?to=2027-03-16T00:00:00Z", "", 400, func(t *testing.T, b map[string]any) {
			assert.Contains(t, b["error"], "from is required")
		}},
		{"calendar with a bad time", "GET", "/api/calendar?from=yesterday&to=2027-03-16T00:00:00Z", "", 400, func(t *testing.T, b map[string]any) {
			assert.Contains(t, b["error"], `from "yesterday" is not an RFC 3339 time`)
		}},
		{"calendar backwards", "GET", "/api/calendar?from=2027-03-16T00:00:00Z&to=2027-03-15T00:00:00Z", "", 400, nil},
		{"calendar window too long", "GET", "/api/calendar?from=2027-01-01T00:00:00Z&to=2028-06-01T00:00:00Z", "", 400, nil},
		{"calendar resource too long", "GET", "/api/calendar?from=2027-03-15T00:00:00Z&to=2027-03-16T00:00:00Z&resource=" + long, "", 400, nil},
		{"calendar by POST", "POST", "/api/calendar", "", 405, nil},
		{"reconciliation", "GET", "/api/reconciliation", "", 200, func(t *testing.T, b map[string]any) {
			it := b["items"].([]any)[0].(map[string]any)
			assert.Equal(t, float64(3), it["id"])
			assert.Equal(t, "quarantined", it["kind"])
			assert.Equal(t, float64(9), it["receipt_id"])
			assert.NotContains(t, it, "closed_at")
		}},
		{"resolve", "POST", "/api/reconciliation/3/resolve", `{"note":"fixed by hand"}`, 200, func(t *testing.T, b map[string]any) {
			assert.Equal(t, "fixed by hand", b["note"])
			assert.Equal(t, "operator", b["closed_by"])
			assert.Equal(t, "front-desk", b["resolved_by"], "the actor is recorded")
		}},
		{"resolve without an actor", "POST", "/api/reconciliation/3/resolve?anonymous", `{"note":"x"}`, 403, func(t *testing.T, b map[string]any) {
			assert.Equal(t, "no_actor", b["code"])
		}},
		{"resolve with a bad id", "POST", "/api/reconciliation/abc/resolve", `{"note":"x"}`, 400, nil},
		{"resolve with a negative id", "POST", "/api/reconciliation/-4/resolve", `{"note":"x"}`, 400, nil},
		{"resolve without JSON", "POST", "/api/reconciliation/3/resolve", `note=x`, 400, nil},
		{"resolve with unknown fields", "POST", "/api/reconciliation/3/resolve", `{"note":"x","by":"me"}`, 400, nil},
		{"resolve with two objects", "POST", "/api/reconciliation/3/resolve", `{"note":"x"}{"note":"y"}`, 400, nil},
		{"resolve with a huge body", "POST", "/api/reconciliation/3/resolve", `{"note":"` + strings.Repeat("x", 20000) + `"}`, 413, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := call(t, srv, c.method, c.path, c.body)
			assert.Equal(t, c.status, status, "body %v", body)
			if c.check != nil {
				c.check(t, body)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("resolve item 3: %w", projections.ErrNotFound), 404, "not_found"},
		{fmt.Errorf("resolve item 3: %w", projections.ErrItemClosed), 409, "already_closed"},
		{fmt.Errorf("%w: a resolution note is required", projections.ErrInvalidQuery), 400, "invalid_request"},
		{errors.New("connection reset by peer"), 500, "internal"},
	}
	for _, c := range cases {
		t.Run(c.code, func(t *testing.T) {
			srv := serve(t, &fakeReader{resolveErr: c.err})
			status, body := call(t, srv, "POST", "/api/reconciliation/3/resolve", `{"note":""}`)
			assert.Equal(t, c.status, status)
			assert.Equal(t, c.code, body["code"])
			if c.status == 500 {
				assert.Equal(t, "internal error", body["error"], "internal errors are not exposed")
			}
		})
	}
}
