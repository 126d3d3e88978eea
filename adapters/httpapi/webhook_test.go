package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calendly"
)

func TestRedeliveryIsAckedAsDuplicateWithoutASecondEvent(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	d := ts.calendlyDelivery(t, calendly.EventInviteeCreated, "redelivered")

	first := ts.send(t, d)
	require.Equal(t, http.StatusOK, first.Status, "%s", first.Body)
	ts.Clock.Advance(30 * time.Second) // a retry is signed again, later
	d2 := ts.calendlyDelivery(t, calendly.EventInviteeCreated, "redelivered")
	require.Equal(t, d.Body, d2.Body, "a redelivery repeats the body")
	second := ts.send(t, d2)
	require.Equal(t, http.StatusOK, second.Status, "%s", second.Body)

	a, b := first.JSON(t), second.JSON(t)
	assert.Equal(t, "accepted", a["status"])
	assert.Equal(t, "duplicate", b["status"])
	assert.Equal(t, "calendly-redelivered", a["booking"])
	assert.Equal(t, "booking-calendly-redelivered", a["stream"])
	assert.Equal(t, a["event_id"], b["event_id"])
	assert.NotEmpty(t, a["event_id"])

	assert.Equal(t, 1, ts.events(t))
	assert.Equal(t, 1, ts.receipts(t, "accepted"))
	assert.Equal(t, 1, ts.receipts(t, "duplicate"))
	assert.Equal(t, 1, ts.eventsWithID(t, a["event_id"]))
	if ts.Stores.ESDB != nil {
		assert.Zero(t, ts.count(t, `SELECT count(*) FROM events`), "with EventStoreDB selected, no event is in PostgreSQL")
		assert.Equal(t, 1, ts.Stores.ESDB.StreamLength("booking-calendly-redelivered"))
	}
	assert.Equal(t, 2, ts.count(t, `SELECT count(*) FROM receipts WHERE receipt_body(body, body_digest) = $1 AND secret_ref <> ''`, d.Body),
		"both receipts keep the verified body and name the secret")
	assert.Equal(t, 1.0, ts.metric(t, httpapi.MetricDeliveries, map[string]string{"provider": "calendly", "outcome": "accepted"}))
	assert.Equal(t, 1.0, ts.metric(t, httpapi.MetricDeliveries, map[string]string{"provider": "calendly", "outcome": "duplicate"}))
	assert.Equal(t, 2.0, ts.metric(t, httpapi.MetricAckSeconds, map[string]string{"provider": "calendly"}))
}

func TestConcurrentCopiesAppendOneEvent(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	d := ts.calendlyDelivery(t, calendly.EventInviteeCreated, "stampede")
	const copies = 20

	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		replies  = make([]reply, copies)
		errs     = make([]error, copies)
		client   = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: copies}}
		statuses = map[string]int{}
	)
	for i := range copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i], errs[i] = postTo(context.Background(), client, ts.URL, d.Provider, d.Header, d.Body)
		}()
	}
	close(start)
	wg.Wait()

	eventIDs := map[string]bool{}
	for i := range copies {
		require.NoError(t, errs[i])
		require.Equal(t, http.StatusOK, replies[i].Status, "%s", replies[i].Body)
		m := replies[i].JSON(t)
		statuses[m["status"]]++
		eventIDs[m["event_id"]] = true
	}
	assert.Equal(t, map[string]int{"accepted": 1, "duplicate": copies - 1}, statuses)
	assert.Len(t, eventIDs, 1, "every copy names the same event")
	assert.Equal(t, 1, ts.events(t))
	assert.Equal(t, copies, ts.count(t, `SELECT count(*) FROM receipts`))
	assert.Equal(t, 1, ts.receipts(t, "accepted"))
	assert.Equal(t, copies-1, ts.receipts(t, "duplicate"))
}

func TestUnverifiedRequestsAreRefusedAndNeverAppended(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	valid := ts.calendlyDelivery(t, calendly.EventInviteeCreated, "forged")
	now := ts.Clock.Now()

	cases := []struct {
		name     string
		provider string
		header   http.Header
		status   int
		code     string
		receipt  bool
	}{
		{"missing header", "calendly", header(), http.StatusUnauthorized, "missing_header", true},
		{"malformed header", "calendly", header(calendly.SignatureHeader, "t=yesterday,v1=zz"), http.StatusUnauthorized, "malformed_header", true},
		{"bad signature", "calendly", header(calendly.SignatureHeader, calendly.Sign("not-the-key", now, valid.Body)), http.StatusUnauthorized, "bad_signature", true},
		{"stale timestamp", "calendly", header(calendly.SignatureHeader, calendly.Sign(calendlyKey, now.Add(-calendly.DefaultTolerance-time.Second), valid.Body)), http.StatusUnauthorized, "stale_timestamp", true},
		{"future timestamp", "calendly", header(calendly.SignatureHeader, calendly.Sign(calendlyKey, now.Add(calendly.DefaultTolerance+time.Second), valid.Body)), http.StatusUnauthorized, "stale_timestamp", true},
		{"unknown provider", "nope", valid.Header, http.StatusNotFound, "unknown_provider", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			label := tc.provider
			if tc.status == http.StatusNotFound {
				label = "unknown"
			}
			rejectionsBefore := ts.metric(t, httpapi.MetricRejections, map[string]string{"provider": label, "reason": tc.code})
			receiptsBefore := ts.receipts(t, "rejected")

			r := ts.post(t, tc.provider, tc.header, valid.Body)

			assert.Equal(t, tc.status, r.Status, "%s", r.Body)
			assert.Equal(t, tc.code, r.JSON(t)["code"])
			assert.NotEmpty(t, r.JSON(t)["error"])
			assert.Equal(t, 0, ts.events(t), "nothing appended")
			assert.Equal(t, rejectionsBefore+1, ts.metric(t, httpapi.MetricRejections, map[string]string{"provider": label, "reason": tc.code}))
			wantReceipts := receiptsBefore
			if tc.receipt {
				wantReceipts++
			}
			assert.Equal(t, wantReceipts, ts.receipts(t, "rejected"))
		})
	}
	assert.Equal(t, 0, ts.count(t, `SELECT count(*) FROM receipts WHERE outcome = 'rejected' AND (receipt_body(body, body_digest) IS NOT NULL OR secret_ref <> '')`),
		"a rejected receipt keeps no body and names no secret")
	assert.Equal(t, 0, ts.count(t, `SELECT count(*) FROM receipts WHERE outcome <> 'rejected'`))
	assert.Equal(t, 2, ts.count(t, `SELECT count(*) FROM receipts WHERE reason LIKE 'stale_timestamp:%' AND reason LIKE '%(`+strconv.Itoa(len(valid.Body))+` bytes)'`),
		"the receipts (past and future) say why and how big")
	assert.Empty(t, contains(ts.Logs.String(), calendlyKey), "the secret never reaches the logs")
}

func TestProviderWithoutSecretFailsClosed(t *testing.T) {
	parallel(t)
	ts := newServer(t, withProviders(calendly.New(providers.NewSecrets(), 0)))
	d := ts.calendlyDelivery(t, calendly.EventInviteeCreated, "no-secret")

	r := ts.send(t, d)

	assert.Equal(t, http.StatusUnauthorized, r.Status)
	assert.Equal(t, "no_secret", r.JSON(t)["code"])
	assert.Equal(t, 0, ts.events(t))
	assert.Equal(t, 1, ts.receipts(t, "rejected"))
	assert.Equal(t, 1.0, ts.metric(t, httpapi.MetricRejections, map[string]string{"provider": "calendly", "reason": "no_secret"}))
}

func TestOversizedBodyIs413NeverTruncated(t *testing.T) {
	parallel(t)
	probe := newServer(t) // only to size a valid delivery
	size := len(probe.calendlyDelivery(t, calendly.EventInviteeCreated, "big").Body)

	ts := newServer(t, withMaxBody(int64(size)))
	d := ts.calendlyDelivery(t, calendly.EventInviteeCreated, "big")
	// The same document one byte longer, correctly signed: only its size is wrong.
	padded := append(bytes.Clone(d.Body), ' ')
	h := header(calendly.SignatureHeader, calendly.Sign(calendlyKey, ts.Clock.Now(), padded))

	r := ts.post(t, "calendly", h, padded)
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.Status, "%s", r.Body)
	assert.Equal(t, "body_too_large", r.JSON(t)["code"])
	assert.Equal(t, 0, ts.events(t))
	assert.Equal(t, 1, ts.receipts(t, "rejected"))
	assert.Equal(t, 1.0, ts.metric(t, httpapi.MetricRejections, map[string]string{"provider": "calendly", "reason": "body_too_large"}))

	// Without a Content-Length (chunked), the cap is enforced while reading.
	req, err := http.NewRequest(http.MethodPost, ts.URL+"/webhooks/calendly", io.MultiReader(bytes.NewReader(padded)))
	require.NoError(t, err)
	req.Header = h.Clone()
	req.ContentLength = -1 // unknown: the transport sends it chunked
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Equal(t, 2.0, ts.metric(t, httpapi.MetricRejections, map[string]string{"provider": "calendly", "reason": "body_too_large"}))
	assert.Equal(t, 0, ts.events(t))

	atLimit := ts.send(t, d)
	assert.Equal(t, http.StatusOK, atLimit.Status, "a body of exactly the cap is accepted: %s", atLimit.Body)
}

func TestRejectedReceiptsAreRateLimitedButAlwaysCounted(t *testing.T) {
	parallel(t)
	const perMinute = 5
	ts := newServer(t, withRejectReceipts(perMinute))
	body := ts.calendlyDelivery(t, calendly.EventInviteeCreated, "flood").Body
	bad := header(calendly.SignatureHeader, calendly.Sign("attacker", ts.Clock.Now(), body))

	for range perMinute + 10 {
		r := ts.post(t, "calendly", bad, body)
		require.Equal(t, http.StatusUnauthorized, r.Status)
	}
	assert.Equal(t, perMinute, ts.receipts(t, "rejected"), "the bucket holds one minute's worth")
	assert.Equal(t, float64(perMinute+10), ts.metric(t, httpapi.MetricRejections, map[string]string{"provider": "calendly", "reason": "bad_signature"}))
	assert.Equal(t, 10.0, ts.metric(t, httpapi.MetricReceiptsDropped, map[string]string{"provider": "calendly"}))

	ts.Clock.Advance(12 * time.Second) // one token at 5 per minute
	for range 3 {
		bad = header(calendly.SignatureHeader, calendly.Sign("attacker", ts.Clock.Now(), body))
		require.Equal(t, http.StatusUnauthorized, ts.post(t, "calendly", bad, body).Status)
	}
	assert.Equal(t, perMinute+1, ts.receipts(t, "rejected"), "the bucket refills at its rate, no faster")
	assert.Equal(t, 0, ts.events(t))

	// A valid delivery is never limited by the rejection budget.
	ok := ts.send(t, ts.calendlyDelivery(t, calendly.EventInviteeCreated, "flood"))
	assert.Equal(t, http.StatusOK, ok.Status)
}

func TestRejectedReceiptsOffStillCounts(t *testing.T) {
	parallel(t)
	ts := newServer(t, withRejectReceipts(0))
	r := ts.post(t, "calendly", header(), []byte(`{}`))
	assert.Equal(t, http.StatusUnauthorized, r.Status)
	assert.Equal(t, 0, ts.receipts(t, "rejected"))
	assert.Equal(t, 1.0, ts.metric(t, httpapi.MetricRejections, map[string]string{"provider": "calendly", "reason": "missing_header"}))
}

func TestVerifiedButMalformedBodyIsQuarantinedAndKept(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	body := []byte(`{"event":"invitee.created","created_at":"2026-03-02T09:59:00.000000Z","payload":{"uri":"not-an-invitee-uri"}}`)
	h := header(calendly.SignatureHeader, calendly.Sign(calendlyKey, ts.Clock.Now(), body))

	r := ts.post(t, "calendly", h, body)

	require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
	m := r.JSON(t)
	assert.Equal(t, "quarantined", m["status"])
	assert.NotEmpty(t, m["reason"])
	assert.Equal(t, 0, ts.events(t))
	assert.Equal(t, 1, ts.count(t, `SELECT count(*) FROM receipts WHERE outcome = 'quarantined' AND receipt_body(body, body_digest) = $1 AND reason <> ''`, body),
		"the exact verified bytes are kept for operators")
	assert.Equal(t, 1.0, ts.metric(t, httpapi.MetricDeliveries, map[string]string{"provider": "calendly", "outcome": "quarantined"}))
}

// A verified body the provider's mapper cannot read at all names no delivery: its receipt is named
// by the body's SHA-256, so that a redelivery of the same bytes is recognised as the same delivery
// (its copies relate in `receipts show`) and two different bodies are not.
func TestVerifiedBodyWithoutIdentityIsNamedByItsDigest(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	bodies := [][]byte{[]byte(`not json at all`), []byte(`{"event":`)}
	for _, body := range append(bodies, bodies[0]) {
		h := header(calendly.SignatureHeader, calendly.Sign(calendlyKey, ts.Clock.Now(), body))
		r := ts.post(t, "calendly", h, body)
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
		require.Equal(t, "quarantined", r.JSON(t)["status"])
	}
	for i, body := range bodies {
		sum := sha256.Sum256(body)
		assert.Equal(t, 2-i, ts.count(t, `SELECT count(*) FROM receipts WHERE provider = 'calendly' AND delivery_id = $1`, "sha256:"+hex.EncodeToString(sum[:])),
			"body %d: its receipts are named by its digest", i)
	}
}

func TestUnmappedEventTypeIsIgnored(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	body := []byte(`{"event":"routing_form_submission.created","created_at":"2026-03-02T09:59:00.000000Z",` +
		`"payload":{"uri":"https://api.calendly.com/routing_form_submissions/RFS1"}}`)
	h := header(calendly.SignatureHeader, calendly.Sign(calendlyKey, ts.Clock.Now(), body))

	r := ts.post(t, "calendly", h, body)

	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "ignored", r.JSON(t)["status"])
	assert.Equal(t, 0, ts.events(t))
	assert.Equal(t, 1, ts.count(t, `SELECT count(*) FROM receipts WHERE outcome = 'ignored' AND receipt_body(body, body_digest) = $1`, body))
}

func TestCancelBeforeCreateKeepsBoth(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	cancel := ts.send(t, ts.calendlyDelivery(t, calendly.EventInviteeCanceled, "out-of-order"))
	create := ts.send(t, ts.calendlyDelivery(t, calendly.EventInviteeCreated, "out-of-order"))

	require.Equal(t, http.StatusOK, cancel.Status, "%s", cancel.Body)
	require.Equal(t, http.StatusOK, create.Status, "%s", create.Body)
	assert.Equal(t, "accepted", cancel.JSON(t)["status"])
	assert.Equal(t, "accepted", create.JSON(t)["status"])
	stream := ts.stream(t, "booking-calendly-out-of-order")
	require.Len(t, stream, 2)
	assert.Equal(t, uint64(1), stream[0].Version)
	assert.Equal(t, "booking.canceled.v1", stream[0].Type, "arrival order: the cancel is version 1")
}

func TestStoreUnavailableIs503AndNothingAcked(t *testing.T) {
	parallel(t)
	ts := newServerOn(t, ownPool(t))
	d := ts.calendlyDelivery(t, calendly.EventInviteeCreated, "outage")
	ts.storeDown(t) // the server's event store goes away

	r := ts.send(t, d)

	assert.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	assert.Equal(t, 1.0, ts.metric(t, httpapi.MetricDeliveries, map[string]string{"provider": "calendly", "outcome": "unavailable"}))
	assert.Equal(t, 0.0, ts.metric(t, httpapi.MetricAckSeconds, map[string]string{"provider": "calendly"}), "no ack observed")

	ready, err := http.Get(ts.URL + "/readyz")
	require.NoError(t, err)
	ready.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, ready.StatusCode)

	ts.storeUp(t)
	assert.Zero(t, ts.events(t))
	assert.Zero(t, ts.count(t, `SELECT count(*) FROM receipts`))
}

func TestTransientMapErrorIs503WithoutReceipt(t *testing.T) {
	parallel(t)
	flaky := &stubProvider{name: "flaky", mapErr: context.DeadlineExceeded}
	ts := newServer(t, withProviders(flaky))

	r := ts.post(t, "flaky", header(), []byte(`{"x":1}`))

	assert.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
	assert.Equal(t, "map_unavailable", r.JSON(t)["code"])
	assert.Equal(t, strconv.Itoa(int(httpapi.DefaultRetryAfter/time.Second)), r.Header.Get("Retry-After"))
	assert.Equal(t, 0, ts.count(t, `SELECT count(*) FROM receipts`))
}

// Retry-After is whole seconds (RFC 9110), rounded up: a provider told to come back sooner than
// the configured pause would retry into the same outage.
func TestRetryAfterRoundsUpToWholeSeconds(t *testing.T) {
	parallel(t)
	flaky := &stubProvider{name: "flaky", mapErr: context.DeadlineExceeded}
	ts := newServer(t, withProviders(flaky), func(c *httpapi.Config) { c.RetryAfter = 1500 * time.Millisecond })

	r := ts.post(t, "flaky", header(), []byte(`{"x":1}`))

	require.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Body)
	assert.Equal(t, "2", r.Header.Get("Retry-After"))
}

func TestUnexpectedVerifyErrorFailsClosed(t *testing.T) {
	parallel(t)
	odd := &stubProvider{name: "odd", verifyErr: context.Canceled}
	ts := newServer(t, withProviders(odd))

	r := ts.post(t, "odd", header(), []byte(`{"x":1}`))

	assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
	assert.Equal(t, "verification_failed", r.JSON(t)["code"])
	assert.Equal(t, int32(0), atomic.LoadInt32(&odd.mapped), "Map never runs on an unverified body")
	assert.Equal(t, 1, ts.receipts(t, "rejected"))
}

func TestLogsCarryNoSecretBodyOrPersonalData(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	d := ts.calendlyDelivery(t, calendly.EventInviteeCreated, "private")
	require.Equal(t, http.StatusOK, ts.send(t, d).Status)
	bad := header(calendly.SignatureHeader, calendly.Sign("wrong", ts.Clock.Now(), d.Body))
	require.Equal(t, http.StatusUnauthorized, ts.post(t, "calendly", bad, d.Body).Status)
	malformed := []byte(`{"event":"invitee.created","payload":{"uri":"x","email":"ada.lovelace@example.com"}}`)
	require.Equal(t, http.StatusAccepted, ts.post(t, "calendly",
		header(calendly.SignatureHeader, calendly.Sign(calendlyKey, ts.Clock.Now(), malformed)), malformed).Status)

	logs := ts.Logs.String()
	require.Contains(t, logs, `"outcome":"accepted"`, "deliveries are logged")
	require.Contains(t, logs, `"booking":"calendly-private"`)
	assert.Empty(t, contains(logs, calendlyKey, "ada.lovelace@example.com", "Ada Lovelace", "Grace Hopper", `"questions_and_answers"`))
}

func TestMetricsEndpointServesTheServerRegistry(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	require.Equal(t, http.StatusOK, ts.send(t, ts.calendlyDelivery(t, calendly.EventInviteeCreated, "metrics")).Status)
	require.Equal(t, http.StatusUnauthorized, ts.post(t, "calendly", header(), []byte(`{}`)).Status)

	text := ts.scrape(t)
	assert.Contains(t, text, httpapi.MetricDeliveries+`{outcome="accepted",provider="calendly"} 1`)
	assert.Contains(t, text, httpapi.MetricRejections+`{provider="calendly",reason="missing_header"} 1`)
	assert.Contains(t, text, httpapi.MetricAckSeconds+`_count{provider="calendly"} 1`)
}

func TestHealthAndReadiness(t *testing.T) {
	// Not parallel: /readyz answers within a deadline of its own (2 s), which the other tests' load
	// on a busy machine could exceed. The pool is connected before the probe for the same reason.
	ts := newServer(t)
	require.NoError(t, ts.Pool.Ping(context.Background()))
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(ts.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	// The probe shows the reason; the cause, which can name a host, goes only to the log.
	const cause = "dial tcp 10.9.8.7:5432: connect: connection refused"
	notReady := newServer(t, func(c *httpapi.Config) {
		c.Ready = httpapi.CheckFunc(func(context.Context) error {
			return &httpapi.NotReady{Reason: "database unreachable", Cause: errors.New(cause)}
		})
	})
	resp, err := http.Get(notReady.URL + "/readyz")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.JSONEq(t, `{"status":"unavailable","error":"database unreachable"}`, string(body))
	lines := notReady.linesOf(t, "not ready")
	require.Len(t, lines, 1)
	assert.Equal(t, "database unreachable", lines[0]["error"])
	assert.Equal(t, cause, lines[0]["cause"])
}

func TestWrongMethodIsNotAWebhook(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	resp, err := http.Get(ts.URL + "/webhooks/calendly")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, 0, ts.count(t, `SELECT count(*) FROM receipts`))
}

// A 401 for a missing header names the header the provider expects.
func TestMissingHeaderNamesTheHeaderExpected(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	for provider, want := range map[string]string{
		"calendly": "missing signature header: Calendly-Webhook-Signature",
		"calcom":   "missing signature header: X-Cal-Signature-256",
		"stripe":   "missing signature header: Stripe-Signature",
		"standard": "missing signature header: webhook-id (or svix-id)",
	} {
		r := ts.post(t, provider, header(), []byte(`{}`))
		assert.Equal(t, http.StatusUnauthorized, r.Status, provider)
		assert.Equal(t, "missing_header", r.JSON(t)["code"], provider)
		assert.Equal(t, want, r.JSON(t)["error"], provider)
	}
}

// A name PostgreSQL's text cannot hold (a JSON "\u0000") is left out of the invitee's contact, and the
// delivery is recorded. Before, the contact's insert failed the commit of the delivery's events, and
// a correctly signed delivery was answered 503 on every retry.
func TestContactTextPostgreSQLCannotHoldIsLeftOut(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	d := ts.calendlyDelivery(t, calendly.EventInviteeCreated, "nul-name")
	body := bytes.Replace(d.Body, []byte(`"name":"Ada Lovelace"`), []byte(`"name":"Ada\u0000Lovelace"`), 1)
	require.NotEqual(t, d.Body, body, "the sample names its invitee")

	r := ts.post(t, "calendly", header(calendly.SignatureHeader, calendly.Sign(calendlyKey, ts.Clock.Now(), body)), body)

	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "accepted", r.JSON(t)["status"])
	assert.Equal(t, 1, ts.events(t))
	assert.Equal(t, 1, ts.count(t, `SELECT count(*) FROM contacts WHERE booking = 'calendly-nul-name' AND name = '' AND email = 'ada.lovelace@example.com'`))
}
