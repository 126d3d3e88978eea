package sample

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/stripe"
)

func stripeKind() kind {
	return kind{
		events: stripe.Types(), // every mapped type: TestEverySampleVerifiesAndMapsWithTheRealProvider
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

// StripePaymentIntent is the PaymentIntent id of the Stripe samples that pay for booking (the key of
// --booking): a dispute lands on its payment stream "stripe-" + StripePaymentIntent(booking).
func StripePaymentIntent(booking string) string {
	return "pi_" + token("stripe-payment-intent", StripeBookingRef(booking))
}

// stripeBody is a Stripe Event. Its times are fixed offsets from the meeting start p.Start, the times
// of the booking it pays for, as the other providers' samples date their changes (booked 7 days
// before): a declined card 30 s after the booking, the payment (its PaymentIntent and the Checkout
// Session that collected it) a minute after, the refund 6 days before the start, the dispute 5 days
// before. The PaymentIntent, Charge and Checkout Session carry metadata.booking_id; the dispute, as
// Stripe sends it, carries its own empty metadata and lands on the payment's stream, which the
// booking links by the payment's ids.
func stripeBody(event string, p Params) (any, error) {
	ref := StripeBookingRef(p.Booking)
	pi := StripePaymentIntent(p.Booking)
	ch := "ch_" + token("stripe-charge", ref)
	customer := "cus_" + token("stripe-customer", ref)
	const amount = 5000
	metadata := map[string]any{stripe.MetadataBookingKey: ref}
	booked := p.Start.Add(-7 * 24 * time.Hour)
	paid := booked.Add(time.Minute)

	var created time.Time
	var object map[string]any
	switch event {
	case stripe.TypePaymentIntentSucceeded, stripe.TypePaymentIntentFailed:
		created = paid
		object = map[string]any{
			"id":                   pi,
			"object":               "payment_intent",
			"amount":               amount,
			"amount_capturable":    0,
			"amount_received":      amount,
			"capture_method":       "automatic_async",
			"created":              booked.Unix(),
			"currency":             "usd",
			"customer":             customer,
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
		if event == stripe.TypePaymentIntentFailed {
			created = booked.Add(30 * time.Second)
			object["amount_received"] = 0
			object["latest_charge"] = "ch_" + token("stripe-declined-charge", ref)
			object["status"] = "requires_payment_method"
			object["last_payment_error"] = map[string]any{"code": "card_declined", "decline_code": "insufficient_funds",
				"message": "Your card has insufficient funds.", "type": "card_error"}
		}
	case stripe.TypeCheckoutSessionCompleted:
		created = paid.Add(2 * time.Second)
		object = map[string]any{
			"id":                  "cs_test_" + token("stripe-checkout-session", ref),
			"object":              "checkout.session",
			"amount_subtotal":     amount,
			"amount_total":        amount,
			"client_reference_id": ref,
			"created":             booked.Unix(),
			"currency":            "usd",
			"customer":            customer,
			"livemode":            false,
			"metadata":            metadata,
			"mode":                "payment",
			"payment_intent":      pi,
			"payment_status":      "paid",
			"status":              "complete",
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
			"created":         paid.Unix(),
			"currency":        "usd",
			"customer":        customer,
			"description":     "30 Min Meeting",
			"livemode":        false,
			"metadata":        metadata,
			"paid":            true,
			"payment_intent":  pi,
			"refunded":        true,
			"status":          "succeeded",
		}
	case stripe.TypeChargeDisputeCreated:
		created = p.Start.Add(-5*24*time.Hour + 12*time.Second)
		object = map[string]any{
			"id":                   "dp_" + token("stripe-dispute", ref),
			"object":               "dispute",
			"amount":               amount,
			"charge":               ch,
			"created":              created.Add(-time.Second).Unix(),
			"currency":             "usd",
			"is_charge_refundable": true,
			"livemode":             false,
			"metadata":             map[string]any{},
			"payment_intent":       pi,
			"reason":               "fraudulent",
			"status":               "warning_needs_response",
		}
	default:
		return nil, fmt.Errorf("%w: stripe event %q", ErrUnknown, event)
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
