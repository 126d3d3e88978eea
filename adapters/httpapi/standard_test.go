package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers/standard"
)

func TestStandardWebhooksRetryWithAFreshTimestampIsADuplicate(t *testing.T) {
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
