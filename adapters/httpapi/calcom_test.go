package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/providers/calcom"
)

func TestCalcomReplayOfASignedBodyLaterIsADuplicate(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	d := ts.calcomDelivery(t, calcom.TriggerBookingCreated, "replayed")

	first := ts.send(t, d)
	require.Equal(t, http.StatusOK, first.Status, "%s", first.Body)
	// Cal.com signs no timestamp: the captured request still verifies a day later, byte for byte.
	ts.Clock.Advance(24 * time.Hour)
	replay := ts.send(t, d)
	require.Equal(t, http.StatusOK, replay.Status, "%s", replay.Body)

	assert.Equal(t, "accepted", first.JSON(t)["status"])
	assert.Equal(t, "duplicate", replay.JSON(t)["status"])
	assert.Equal(t, first.JSON(t)["event_id"], replay.JSON(t)["event_id"])
	assert.Equal(t, 1, ts.events(t))
}

func TestCalcomNoSecretProvidedIsRejected(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	d := ts.calcomDelivery(t, calcom.TriggerBookingCreated, "unsigned")

	cases := map[string]struct {
		value string
		code  string
	}{
		"no-secret-provided": {calcom.NoSecretProvided, "bad_signature"},
		"missing":            {"", "missing_header"},
		"not hex":            {"zz", "malformed_header"},
		"other secret":       {calcom.Sign("other", d.Body), "bad_signature"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := header(calcom.SignatureHeader, tc.value)
			r := ts.post(t, "calcom", h, d.Body)
			assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
			assert.Equal(t, tc.code, r.JSON(t)["code"])
			assert.Equal(t, 0, ts.events(t))
		})
	}
	assert.Equal(t, 2.0, ts.metric(t, httpapi.MetricRejections, map[string]string{"provider": "calcom", "reason": "bad_signature"}))
}

func TestCalcomRescheduleAppendsToBothBookings(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	require.Equal(t, http.StatusOK, ts.send(t, ts.calcomDelivery(t, calcom.TriggerBookingCreated, "moved")).Status)
	r := ts.send(t, ts.calcomDelivery(t, calcom.TriggerBookingRescheduled, "moved"))
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "accepted", r.JSON(t)["status"])
	assert.Len(t, ts.stream(t, "booking-calcom-moved"), 2, "created, then the implied cancel")
	assert.Len(t, ts.stream(t, "booking-calcom-moved-rescheduled"), 1)
}
