package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers/stripe"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

// A quarantined delivery can be inspected: receipts list finds it by outcome and provider, receipts
// show prints its reason, body and the other receipts of the delivery, the read API answers the same,
// and reconcile list points there.
func TestReceiptsListAndShowAQuarantinedDelivery(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          servetest.NewDatabaseURL(t),
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		"BOOKINGLEDGER_DRAIN_TIMEOUT":         "5s",
		"BOOKINGLEDGER_MASTER_KEY":            testMasterKey, // receipts show opens the sealed body with it
	})
	srv := startServe(t, env)
	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "fine")
	raw := filepath.Join(t.TempDir(), "broken.json")
	const broken = `{"event":"invitee.created","payload":{"uri":42}}`
	require.NoError(t, os.WriteFile(raw, []byte(broken), 0o600))
	out := send(t, env, srv.Base, "calendly", "--raw", raw)
	require.Contains(t, out, `"status":"quarantined"`)
	out = send(t, env, srv.Base, "calendly", "--raw", raw) // the same body again
	require.Contains(t, out, `"status":"quarantined"`)

	stdout, stderr, code := cli(t, env, "receipts", "list", "--outcome", "quarantined", "--provider", "calendly")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "receipts (2, newest first)")
	assert.Contains(t, stdout, "quarantined")
	assert.NotContains(t, stdout, "accepted")

	stdout, stderr, code = cli(t, env, "receipts", "list", "--json", "--outcome", "quarantined")
	require.Equal(t, 0, code, stderr)
	var list readapi.ReceiptsDTO
	require.NoError(t, json.Unmarshal([]byte(stdout), &list))
	require.Len(t, list.Receipts, 2)
	_, httpList := httpDo(t, srv.AdminToken(t), http.MethodGet, srv.Admin+"/api/receipts?outcome=quarantined", "")
	assert.JSONEq(t, httpList, stdout, "receipts list --json is the HTTP answer")
	first, second := list.Receipts[1], list.Receipts[0] // newest first

	stdout, stderr, code = cli(t, env, "receipts", "show", fmt.Sprint(first.ID))
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{fmt.Sprintf("receipt #%d: calendly", first.ID), "outcome:   quarantined", "reason:", broken,
		"what became of the delivery (1 other receipt(s))", fmt.Sprintf("#%d", second.ID)} {
		assert.Contains(t, stdout, want)
	}
	var detail readapi.ReceiptDetailDTO
	getJSON(t, srv.AdminToken(t), fmt.Sprintf("%s/api/receipts/%d", srv.Admin, first.ID), &detail)
	require.NotNil(t, detail.Body)
	assert.Equal(t, broken, *detail.Body)
	require.Len(t, detail.Related, 1)
	assert.Equal(t, second.ID, detail.Related[0].ID)

	status, body := httpDo(t, srv.AdminToken(t), http.MethodGet, srv.Admin+"/api/receipts/999999", "")
	assert.Equal(t, http.StatusNotFound, status, body)
	status, body = httpDo(t, srv.AdminToken(t), http.MethodGet, srv.Admin+"/api/receipts?outcome=lost", "")
	assert.Equal(t, http.StatusBadRequest, status, body)
	assert.Contains(t, body, "invalid_request")
	_, stderr, code = cli(t, env, "receipts", "list", "--outcome", "lost")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `outcome "lost" is not one of`)
	_, stderr, code = cli(t, env, "receipts", "show", "999999")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "no receipt 999999")

	stdout, stderr, code = cli(t, env, "reconcile", "list")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "bookingledger receipts list --outcome quarantined")
}

// A receipt keeps the request's headers that say how it was sent and signed, and never a credential or
// a client address: receipts show prints them and GET /api/receipts/{id} answers them, for a verified
// delivery and for a rejected one alike.
func TestReceiptsShowTheHeadersKeptAndNeverSecrets(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          servetest.NewDatabaseURL(t),
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		"BOOKINGLEDGER_DRAIN_TIMEOUT":         "5s",
	})
	srv := startServe(t, env)
	d, err := sample.Build("calendly", "invitee.created", demoCalendlyKey, sample.Params{Booking: "headers"}, time.Now())
	require.NoError(t, err)
	secrets := map[string]string{
		"Authorization":       "Bearer secret-bearer-token",
		"Proxy-Authorization": "Basic c2VjcmV0LXByb3h5",
		"Cookie":              "session=secret-session-cookie",
		"X-Forwarded-For":     "203.0.113.77",
		"X-Real-Ip":           "203.0.113.78",
		"Forwarded":           "for=203.0.113.79",
		"X-Api-Key":           "secret-api-key",
	}
	post := func(sig string) readapi.ReceiptDetailDTO {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.Base+"/webhooks/calendly", bytes.NewReader(d.Body))
		require.NoError(t, err)
		req.Header = d.Header.Clone()
		for k, v := range secrets {
			req.Header.Set(k, v)
		}
		req.Header.Set("X-Request-Id", "req-42")
		if sig != "" {
			req.Header.Set("Calendly-Webhook-Signature", sig)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		var list readapi.ReceiptsDTO
		getJSON(t, srv.AdminToken(t), srv.Admin+"/api/receipts?limit=1", &list)
		require.Len(t, list.Receipts, 1)
		var detail readapi.ReceiptDetailDTO
		getJSON(t, srv.AdminToken(t), fmt.Sprintf("%s/api/receipts/%d", srv.Admin, list.Receipts[0].ID), &detail)
		return detail
	}
	check := func(detail readapi.ReceiptDetailDTO, outcome, signature string) {
		t.Helper()
		assert.Equal(t, outcome, detail.Outcome)
		kept := map[string]string{}
		for _, h := range detail.Headers {
			kept[h.Name] = h.Value
		}
		assert.Equal(t, map[string]string{
			"Calendly-Webhook-Signature": signature,
			"Content-Type":               "application/json",
			"Content-Length":             fmt.Sprint(len(d.Body)),
			"User-Agent":                 "bookingledger-send",
			"X-Request-Id":               "req-42",
			"Accept-Encoding":            "gzip",
		}, kept)
		stdout, stderr, code := cli(t, env, "receipts", "show", fmt.Sprint(detail.ID))
		require.Equal(t, 0, code, stderr)
		assert.Contains(t, stdout, "headers (6 kept)")
		assert.Contains(t, stdout, "  Calendly-Webhook-Signature: "+signature+"\n")
		assert.Contains(t, stdout, "  X-Request-Id: req-42\n")
		apiJSON, err := json.Marshal(detail)
		require.NoError(t, err)
		for name, v := range secrets {
			assert.NotContains(t, stdout, v, name)
			assert.NotContains(t, stdout, name+":", name)
			assert.NotContains(t, string(apiJSON), v, name)
		}
	}
	check(post(""), "accepted", d.Header.Get("Calendly-Webhook-Signature"))
	const forged = "t=1,v1=00"
	check(post(forged), "rejected", forged)
}

// send stripe has a sample of every Stripe event the ingress maps, each accepted; without --start it
// dates them from the paid booking's own start, read from the calendar, so that the payment follows
// the booking instead of landing in 2030.
func TestSendStripeCoversEveryMappedEventDatedFromTheBooking(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          servetest.NewDatabaseURL(t),
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		"BOOKINGLEDGER_STRIPE_SECRETS":        "whsec_send-test",
		"BOOKINGLEDGER_DRAIN_TIMEOUT":         "5s",
	})
	srv := startServe(t, env)
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "paid", "--start", start.Format(time.RFC3339))
	waitForCalendar(t, srv.AdminToken(t), srv.Admin, "2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z", map[string]string{"calendly-paid": "active"})

	require.ElementsMatch(t, stripe.Types(), sample.Events("stripe"), "a sample of every mapped Stripe event")
	for _, event := range stripe.Types() {
		out := send(t, env, srv.Base, "stripe", event, "--booking", "paid")
		assert.Contains(t, out, `"status":"accepted"`, event)
	}
	var h struct {
		Events []struct {
			Type       string    `json:"type"`
			OccurredAt time.Time `json:"occurred_at"`
		} `json:"events"`
	}
	var payments []string
	for _, stream := range []string{"calendly-paid", "stripe-" + sample.StripePaymentIntent("paid")} {
		getJSON(t, srv.AdminToken(t), srv.Admin+"/api/bookings/"+stream+"/history", &h)
		for _, e := range h.Events {
			if e.Type == "booking.scheduled.v1" {
				continue
			}
			payments = append(payments, e.Type)
			booked := start.Add(-7 * 24 * time.Hour)
			assert.True(t, !e.OccurredAt.Before(booked) && e.OccurredAt.Before(start), "%s at %s: between the booking (%s) and its start", e.Type, e.OccurredAt, booked)
		}
	}
	assert.Len(t, payments, len(stripe.Types()), "every payment event is stored: %v", payments)
	_, stderr, code := cli(t, env, "send", "stripe", "payment_intent.succeeded", "--booking", "unknown", "--url", srv.Base)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "booking calendly-unknown is not in the calendar: dating the payment from --start 2030-01-07T09:00:00Z")
}
