package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers/standard"
)

func TestStandardWebhooksRetryWithAFreshTimestampIsADuplicate(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	build := func() sample.Delivery {
		d, err := sample.Build("standard", standard.TypeScheduled, standardSecret, sample.Params{Booking: "sw1"}, ts.Clock.Now())
		require.NoError(t, err)
		return d
	}
	first := build()
	r1 := ts.send(t, first)
	require.Equal(t, http.StatusOK, r1.Status, "%s", r1.Body)
	assert.Equal(t, "accepted", r1.JSON(t)["status"])

	ts.Clock.Advance(10 * time.Minute)
	retry := build() // same webhook-id, new webhook-timestamp and signature
	require.Equal(t, first.Header.Get(standard.HeaderID), retry.Header.Get(standard.HeaderID))
	require.NotEqual(t, first.Header.Get(standard.HeaderTimestamp), retry.Header.Get(standard.HeaderTimestamp))
	r2 := ts.send(t, retry)
	require.Equal(t, http.StatusOK, r2.Status, "%s", r2.Body)
	assert.Equal(t, "duplicate", r2.JSON(t)["status"])

	// The first attempt replayed ten minutes later is outside the 5-minute window.
	stale := ts.send(t, first)
	assert.Equal(t, http.StatusUnauthorized, stale.Status)
	assert.Equal(t, "stale_timestamp", stale.JSON(t)["code"])
	assert.Equal(t, 1, ts.events(t))
}

// Svix sends the Standard Webhooks scheme under svix-* header names; a retry under either family is
// the same delivery.
func TestStandardWebhooksAcceptsSvixHeaders(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	svix := func(d sample.Delivery) sample.Delivery {
		h := http.Header{}
		h.Set(standard.SvixHeaderID, d.Header.Get(standard.HeaderID))
		h.Set(standard.SvixHeaderTimestamp, d.Header.Get(standard.HeaderTimestamp))
		h.Set(standard.SvixHeaderSignature, d.Header.Get(standard.HeaderSignature))
		h.Set("Content-Type", "application/json")
		d.Header = h
		return d
	}
	build := func(key string) sample.Delivery {
		d, err := sample.Build("standard", standard.TypeScheduled, standardSecret, sample.Params{Booking: key}, ts.Clock.Now())
		require.NoError(t, err)
		return d
	}

	r := ts.send(t, svix(build("svix1")))
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "accepted", r.JSON(t)["status"])
	assert.Equal(t, "standard-svix1", r.JSON(t)["booking"])

	// The same message retried under the other family, both ways round.
	ts.Clock.Advance(time.Minute)
	r = ts.send(t, build("svix1"))
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "duplicate", r.JSON(t)["status"])
	first := build("svix2")
	r = ts.send(t, first)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "accepted", r.JSON(t)["status"])
	r = ts.send(t, svix(first))
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "duplicate", r.JSON(t)["status"])

	// A forged svix signature is refused like a webhook-* one.
	forged := svix(build("svix3"))
	forged.Header.Set(standard.SvixHeaderSignature, "v1,"+strings.Repeat("A", 43)+"=")
	r = ts.send(t, forged)
	assert.Equal(t, http.StatusUnauthorized, r.Status)
	assert.Equal(t, "bad_signature", r.JSON(t)["code"])
	assert.Equal(t, 2, ts.events(t))
}

// A body whose times or capacity no event can hold — an end in the year 10000 UTC, more seats than
// the calendar's integer — is kept as quarantined with the reason. Before, the first failed to encode
// and was answered 503 on every retry without a receipt, and the second was appended and stopped the
// calendar projection at that event.
func TestStandardWebhooksQuarantinesTimesAndCapacitiesNoEventHolds(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	for _, tc := range []struct{ id, body, reason string }{
		{"msg_y10000", `{"type":"booking.scheduled","timestamp":"2026-03-02T09:00:00Z","data":{"booking":"y1","resources":["r"],"start":"9999-12-31T20:00:00Z","end":"9999-12-31T23:59:59-23:59"}}`,
			"data.end: time no event can carry: 10000-01-01T23:58:59Z is outside the years 0000 to 9999 (UTC)"},
		{"msg_seats", `{"type":"booking.scheduled","timestamp":"2026-03-02T09:00:00Z","data":{"booking":"y2","resources":["r"],"start":"2026-03-03T10:00:00Z","end":"2026-03-03T11:00:00Z","capacity":3000000000}}`,
			"data.capacity 3000000000 is more than 1000000"},
	} {
		h, err := standard.Headers(standardSecret, tc.id, ts.Clock.Now(), []byte(tc.body))
		require.NoError(t, err)
		r := ts.post(t, "standard", h, []byte(tc.body))
		require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
		assert.Equal(t, "quarantined", r.JSON(t)["status"])
		assert.Contains(t, r.JSON(t)["reason"], tc.reason)
		assert.Equal(t, 1, ts.count(t, `SELECT count(*) FROM receipts WHERE outcome = 'quarantined' AND strpos(reason, $1) > 0`, tc.reason))
	}
	assert.Equal(t, 0, ts.events(t))
}
