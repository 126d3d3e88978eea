package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providers/stripe"
)

func TestStripePaymentJoinsTheBookingItPaysFor(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	require.Equal(t, http.StatusOK, ts.send(t, ts.calendlyDelivery(t, calendly.EventInviteeCreated, "paid")).Status)

	pay, err := sample.Build("stripe", stripe.TypePaymentIntentSucceeded, stripeSecret, sample.Params{Booking: "paid"}, ts.Clock.Now())
	require.NoError(t, err)
	r := ts.send(t, pay)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "calendly-paid", r.JSON(t)["booking"])
	paid := 0
	for _, typ := range ts.streamTypes(t, "booking-calendly-paid") {
		if typ == "booking.payment_succeeded.v1" {
			paid++
		}
	}
	assert.Equal(t, 1, paid)

	// Stripe's timestamp is signed: the same capture replayed past the tolerance is refused.
	ts.Clock.Advance(stripe.DefaultTolerance + time.Second)
	stale := ts.send(t, pay)
	assert.Equal(t, http.StatusUnauthorized, stale.Status)
	assert.Equal(t, "stale_timestamp", stale.JSON(t)["code"])
}
