package sample

import (
	"net/http"
	"strings"
	"time"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/stripe"
)

func stripeKind() kind {
	return kind{
		events: []string{stripe.TypePaymentIntentSucceeded, stripe.TypeChargeRefunded},
		body:   stripeBody,
		sign: func(secret string, body []byte, now time.Time) (http.Header, error) {
			h := http.Header{}
			h.Set(stripe.SignatureHeader, stripe.Sign(secret, now, body))
			return h, nil
		},
	}
}

// StripeBookingRef is the bookingledger booking a Stripe sample pays for: p.Booking when it already
// names a provider ("calcom-…"), else the Calendly booking of that key, the demo's default provider.
func StripeBookingRef(booking string) string {
	for _, prefix := range providers.BookingPrefixes() {
		if strings.HasPrefix(booking, prefix) {
			return booking
		}
	}
	return "calendly-" + booking
}

// stripeBody is a Stripe Event whose object carries metadata.booking_id. Paid 7 days less a minute
// before the start (just after the booking), refunded 6 days before.
func stripeBody(event string, p Params) (any, error) {
	ref := StripeBookingRef(p.Booking)
	pi := "pi_" + token("stripe-payment-intent", ref)
	ch := "ch_" + token("stripe-charge", ref)
	const amount = 5000
	metadata := map[string]any{stripe.MetadataBookingKey: ref}

	var created time.Time
	var object map[string]any
	switch event {
	case stripe.TypePaymentIntentSucceeded:
		created = p.Start.Add(-7*24*time.Hour + time.Minute)
		object = map[string]any{
			"id":                   pi,
			"object":               "payment_intent",
			"amount":               amount,
			"amount_capturable":    0,
			"amount_received":      amount,
			"capture_method":       "automatic_async",
			"created":              created.Add(-time.Minute).Unix(),
			"currency":             "usd",
			"customer":             "cus_" + token("stripe-customer", ref),
			"description":          "30 Min Meeting",
			"last_payment_error":   nil,
			"latest_charge":        ch,
			"livemode":             false,
			"metadata":             metadata,
			"payment_method":       "pm_" + token("stripe-pm", ref),
			"payment_method_types": []string{"card"},
			"receipt_email":        nil,
			"status":               "succeeded",
		}
	case stripe.TypeChargeRefunded:
		created = p.Start.Add(-6*24*time.Hour + 30*time.Second)
		object = map[string]any{
			"id":              ch,
			"object":          "charge",
			"amount":          amount,
			"amount_captured": amount,
			"amount_refunded": amount,
			"captured":        true,
			"created":         p.Start.Add(-7*24*time.Hour + time.Minute).Unix(),
			"currency":        "usd",
			"customer":        "cus_" + token("stripe-customer", ref),
			"description":     "30 Min Meeting",
			"livemode":        false,
			"metadata":        metadata,
			"paid":            true,
			"payment_intent":  pi,
			"refunded":        true,
			"status":          "succeeded",
		}
	}
	return map[string]any{
		"id":               "evt_" + token("stripe-event", event, ref),
		"object":           "event",
		"api_version":      "2024-06-20",
		"created":          created.Unix(),
		"data":             map[string]any{"object": object},
		"livemode":         false,
		"pending_webhooks": 1,
		"request":          map[string]any{"id": "req_" + token("stripe-request", event, ref), "idempotency_key": nil},
		"type":             event,
	}, nil
}
