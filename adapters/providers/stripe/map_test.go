package stripe_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/providertest"
	"bookingledger/adapters/providers/stripe"
	"bookingledger/domain/booking"
)

const (
	piCal      = "pi_3PGxZ9LkdIwHu7ix1aB2cD3e" // paid a Cal.com booking (metadata.booking_id)
	chCal      = "ch_3PGxZ9LkdIwHu7ix1Hs8Kq2M"
	piFail     = "pi_3PHaQ1LkdIwHu7ix0mN5bV6c"
	chFail     = "ch_3PHaQ1LkdIwHu7ix0kL8jH9g"
	piCalendly = "pi_3PGxY2LkdIwHu7ix0TqL9mZr" // paid a Calendly booking (payment.external_id is the charge)
	chCalendly = "ch_3PGxY2LkdIwHu7ix0Vw1Qw1A"
	cs         = "cs_test_a1Q9wE8rT7yU6iO5pA4sD3fG2hJ1kL0zX9cV8bN7mQ6wE5rT4yU3iO2p"
	piCS       = "pi_3PJbC4LkdIwHu7ix1nM2bV3c"
	dispute    = "dp_1PKcD7LkdIwHu7ixZ2x3C4v5"
)

func event(identity string, id booking.ID, created int64, p booking.Payload) booking.Event {
	return booking.Event{
		ID: providers.EventID("stripe", identity), Booking: id, Provider: "stripe",
		ProviderRef: identity, OccurredAt: time.Unix(created, 0).UTC(), Payload: p,
	}
}

func mapBody(tb testing.TB, body []byte) (providers.Mapped, error) {
	tb.Helper()
	return stripe.New(providers.NewSecrets("whsec_x"), 0).Map(context.Background(), nil, body, time.Now())
}

func mapFile(tb testing.TB, name string) (providers.Mapped, error) {
	tb.Helper()
	return mapBody(tb, providertest.ReadFile(tb, name))
}

func TestMapTestdata(t *testing.T) {
	calRefs := []string{"stripe:" + chCal, "stripe:" + piCal}
	calendlyRefs := []string{"stripe:" + chCalendly, "stripe:" + piCalendly}
	tests := []struct {
		file string
		want providers.Mapped
	}{
		{"payment_intent_succeeded.json", providers.Mapped{
			DeliveryID: "evt_3PGxZ9LkdIwHu7ix1Q2w3E4r",
			Events: []booking.Event{event(piCal+":payment_intent.succeeded", "calcom-u8Jq2aXcK4vNw7Rz3TmB9p", 1715678012,
				booking.PaymentSucceeded{Refs: calRefs, Amount: 5000, Currency: "USD"})},
		}},
		{"payment_intent_succeeded_resent.json", providers.Mapped{
			DeliveryID: "evt_3PGxZ9LkdIwHu7ix1Z9y8X7w",
			Events: []booking.Event{event(piCal+":payment_intent.succeeded", "calcom-u8Jq2aXcK4vNw7Rz3TmB9p", 1715678019,
				booking.PaymentSucceeded{Refs: calRefs, Amount: 5000, Currency: "USD"})},
		}},
		{"payment_intent_payment_failed.json", providers.Mapped{
			DeliveryID: "evt_3PHaQ1LkdIwHu7ix0P9o8I7u",
			Events: []booking.Event{event(piFail+":payment_intent.payment_failed", "stripe-"+piFail, 1715850331,
				booking.PaymentFailed{Refs: []string{"stripe:" + chFail, "stripe:" + piFail},
					Reason: "card_declined/insufficient_funds: Your card has insufficient funds."})},
		}},
		{"charge_refunded.json", providers.Mapped{
			DeliveryID: "evt_3PGxY2LkdIwHu7ix0R4e5T6y",
			Events: []booking.Event{event(chCalendly+":charge.refunded:2500", "stripe-"+piCalendly, 1716220801,
				booking.PaymentRefunded{Refs: calendlyRefs, Amount: 2500, Currency: "EUR"})},
		}},
		{"charge_refunded_full.json", providers.Mapped{
			DeliveryID: "evt_3PGxY2LkdIwHu7ix0W1q2A3s",
			Events: []booking.Event{event(chCalendly+":charge.refunded:5000", "stripe-"+piCalendly, 1716307201,
				booking.PaymentRefunded{Refs: calendlyRefs, Amount: 5000, Currency: "EUR"})},
		}},
		{"checkout_session_completed.json", providers.Mapped{
			DeliveryID: "evt_1PJbC5LkdIwHu7ixS8d7F6g5",
			Events: []booking.Event{event(cs+":checkout.session.completed", "standard-room-42-2024-06-12", 1718010094,
				booking.PaymentSucceeded{Refs: []string{"stripe:" + cs, "stripe:" + piCS}, Amount: 12000, Currency: "EUR"})},
		}},
		{"checkout_session_completed_unpaid.json", providers.Mapped{
			DeliveryID: "evt_1PJbE0LkdIwHu7ixQ1w2E3r4",
			Reason:     `stripe checkout.session.completed with payment_status "unpaid" not mapped (its payment_intent events are)`,
		}},
		{"charge_dispute_created.json", providers.Mapped{
			DeliveryID: "evt_1PKcD8LkdIwHu7ixB6n7M8q9",
			Events: []booking.Event{event(dispute+":charge.dispute.created", "stripe-"+piCal, 1718600001,
				booking.PaymentDisputed{Refs: calRefs, Reason: "fraudulent"})},
		}},
		{"customer_created.json", providers.Mapped{
			DeliveryID: "evt_1PGxY0LkdIwHu7ixK9j8H7g6",
			Reason:     "stripe event type customer.created not mapped",
		}},
	}
	var files []string
	for _, n := range providertest.Glob(t, "*.json") {
		if n != "signatures.json" {
			files = append(files, n)
		}
	}
	require.Len(t, tests, len(files), "every testdata payload has an expectation")
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := mapFile(t, tt.file)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			providertest.CheckMapped(t, stripe.Name, got, err)
		})
	}
}

func TestDuplicatesAndDistinctChanges(t *testing.T) {
	first, err := mapFile(t, "payment_intent_succeeded.json")
	require.NoError(t, err)
	again, err := mapFile(t, "payment_intent_succeeded.json")
	require.NoError(t, err)
	assert.Equal(t, first, again, "a retry of the same event maps identically")

	resent, err := mapFile(t, "payment_intent_succeeded_resent.json")
	require.NoError(t, err)
	assert.NotEqual(t, first.DeliveryID, resent.DeliveryID, "a different Event object is a different delivery")
	assert.Equal(t, providertest.IDs(first), providertest.IDs(resent), "but the same business change: a duplicate")

	partial, err := mapFile(t, "charge_refunded.json")
	require.NoError(t, err)
	full, err := mapFile(t, "charge_refunded_full.json")
	require.NoError(t, err)
	assert.NotEqual(t, providertest.IDs(partial), providertest.IDs(full), "each refund of a charge is its own change")

	seen := map[string]string{}
	for _, name := range providertest.Glob(t, "*.json") {
		if name == "signatures.json" || name == "payment_intent_succeeded_resent.json" {
			continue
		}
		m, err := mapFile(t, name)
		require.NoError(t, err)
		for _, id := range providertest.IDs(m) {
			if prev, dup := seen[id]; dup {
				t.Errorf("event id %s of %s already derived from %s", id, name, prev)
			}
			seen[id] = name
		}
	}
	assert.Len(t, seen, 6)
}

func TestPaymentsLinkToBookingsByRef(t *testing.T) {
	// Calendly carries the charge id, Cal.com the PaymentIntent id: each Stripe event carries both.
	refunded, err := mapFile(t, "charge_refunded.json")
	require.NoError(t, err)
	assert.Contains(t, refunded.Events[0].Payload.(booking.PaymentRefunded).Refs, "stripe:"+chCalendly)
	succeeded, err := mapFile(t, "payment_intent_succeeded.json")
	require.NoError(t, err)
	assert.Contains(t, succeeded.Events[0].Payload.(booking.PaymentSucceeded).Refs, "stripe:"+piCal)
}

func TestMapVariants(t *testing.T) {
	succeeded := string(providertest.ReadFile(t, "payment_intent_succeeded.json"))
	refunded := string(providertest.ReadFile(t, "charge_refunded.json"))
	session := string(providertest.ReadFile(t, "checkout_session_completed.json"))
	disputed := string(providertest.ReadFile(t, "charge_dispute_created.json"))

	tests := []struct {
		name        string
		body        string
		wantBooking booking.ID
		wantRefs    []string
	}{
		{"no metadata: the payment intent's own stream",
			strings.Replace(succeeded, `"booking_id": "calcom-u8Jq2aXcK4vNw7Rz3TmB9p"`, `"order": "7781"`, 1),
			"stripe-" + piCal, []string{"stripe:" + chCal, "stripe:" + piCal}},
		{"empty booking_id is no booking_id",
			strings.Replace(succeeded, `"booking_id": "calcom-u8Jq2aXcK4vNw7Rz3TmB9p"`, `"booking_id": ""`, 1),
			"stripe-" + piCal, []string{"stripe:" + chCal, "stripe:" + piCal}},
		{"no latest_charge",
			strings.Replace(succeeded, `"latest_charge": "`+chCal+`"`, `"latest_charge": null`, 1),
			"calcom-u8Jq2aXcK4vNw7Rz3TmB9p", []string{"stripe:" + piCal}},
		{"expanded latest_charge",
			strings.Replace(succeeded, `"latest_charge": "`+chCal+`"`, `"latest_charge": {"id": "`+chCal+`", "object": "charge"}`, 1),
			"calcom-u8Jq2aXcK4vNw7Rz3TmB9p", []string{"stripe:" + chCal, "stripe:" + piCal}},
		{"charge without payment intent: the charge's stream",
			strings.Replace(refunded, `"payment_intent": "`+piCalendly+`",
      "payment_method"`, `"payment_intent": null,
      "payment_method"`, 1),
			"stripe-" + chCalendly, []string{"stripe:" + chCalendly}},
		{"client_reference_id that is not a booking id is the merchant's own",
			strings.Replace(session, `"client_reference_id": "standard-room-42-2024-06-12"`, `"client_reference_id": "customer-8812"`, 1),
			"stripe-" + piCS, []string{"stripe:" + cs, "stripe:" + piCS}},
		{"metadata.booking_id wins over client_reference_id",
			strings.Replace(session, `"metadata": {},
      "mode"`, `"metadata": {"booking_id": "calendly-JQ5WZ3T8KD2RVX6N"},
      "mode"`, 1),
			"calendly-JQ5WZ3T8KD2RVX6N", []string{"stripe:" + cs, "stripe:" + piCS}},
		{"session without payment intent",
			strings.NewReplacer(`"payment_intent": "`+piCS+`"`, `"payment_intent": null`, `"client_reference_id": "standard-room-42-2024-06-12"`, `"client_reference_id": null`).Replace(session),
			booking.ID("stripe-" + cs), []string{"stripe:" + cs}},
		{"dispute without payment intent: the charge's stream",
			strings.Replace(disputed, `"payment_intent": "`+piCal+`"`, `"payment_intent": null`, 1),
			"stripe-" + chCal, []string{"stripe:" + chCal}},
	}
	originals := []string{succeeded, refunded, session, disputed}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, o := range originals {
				require.NotEqual(t, o, tt.body, "the case must change the body")
			}
			got, err := mapBody(t, []byte(tt.body))
			require.NoError(t, err)
			providertest.CheckMapped(t, stripe.Name, got, err)
			require.Len(t, got.Events, 1)
			assert.Equal(t, tt.wantBooking, got.Events[0].Booking)
			var refs []string
			switch p := got.Events[0].Payload.(type) {
			case booking.PaymentSucceeded:
				refs = p.Refs
			case booking.PaymentRefunded:
				refs = p.Refs
			case booking.PaymentDisputed:
				refs = p.Refs
			}
			assert.Equal(t, tt.wantRefs, refs)
		})
	}
}

func TestMapErrors(t *testing.T) {
	succeeded := string(providertest.ReadFile(t, "payment_intent_succeeded.json"))
	tests := []struct{ name, body string }{
		{"not json", "id=evt_1"},
		{"truncated", succeeded[:200]},
		{"no id", strings.Replace(succeeded, `"id": "evt_3PGxZ9LkdIwHu7ix1Q2w3E4r"`, `"id": ""`, 1)},
		{"no type", strings.Replace(succeeded, `"type": "payment_intent.succeeded"`, `"type": null`, 1)},
		{"no created", strings.Replace(succeeded, `"created": 1715678012`, `"created": 0`, 1)},
		{"created in the year 10000", strings.Replace(succeeded, `"created": 1715678012`, `"created": 253402300800`, 1)},
		{"created not a number", strings.Replace(succeeded, `"created": 1715678012`, `"created": "yesterday"`, 1)},
		{"no data.object", `{"id":"evt_1","type":"payment_intent.succeeded","created":1715678012,"data":{}}`},
		{"null data.object", `{"id":"evt_1","type":"payment_intent.succeeded","created":1715678012,"data":{"object":null}}`},
		{"object of the wrong kind", strings.Replace(succeeded, `"object": "payment_intent"`, `"object": "charge"`, 1)},
		{"object without id", strings.Replace(succeeded, `"id": "`+piCal+`"`, `"id": ""`, 1)},
		{"booking_id that is not ours", strings.Replace(succeeded, `"booking_id": "calcom-u8Jq2aXcK4vNw7Rz3TmB9p"`, `"booking_id": "12345"`, 1)},
		{"booking_id with a space", strings.Replace(succeeded, `"booking_id": "calcom-u8Jq2aXcK4vNw7Rz3TmB9p"`, `"booking_id": "calcom-a b"`, 1)},
		{"booking_id not a string", strings.Replace(succeeded, `"booking_id": "calcom-u8Jq2aXcK4vNw7Rz3TmB9p"`, `"booking_id": 7`, 1)},
		{"amount not a number", strings.Replace(succeeded, `"amount_received": 5000`, `"amount_received": "5000"`, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NotEqual(t, succeeded, tt.body, "the case must change the body")
			_, err := mapBody(t, []byte(tt.body))
			require.Error(t, err)
			assert.ErrorIs(t, err, providers.ErrUnmappable)
		})
	}
}

func TestMapRules(t *testing.T) {
	succeeded := string(providertest.ReadFile(t, "payment_intent_succeeded.json"))
	disputed := string(providertest.ReadFile(t, "charge_dispute_created.json"))

	t.Run("a PaymentIntent paid is what it received (a partial capture), else its amount", func(t *testing.T) {
		for received, want := range map[string]int64{`"amount_received": 3500`: 3500, `"amount_received": 0`: 5000} {
			body := strings.Replace(succeeded, `"amount_received": 5000`, received, 1)
			require.NotEqual(t, succeeded, body)
			got, err := mapBody(t, []byte(body))
			require.NoError(t, err)
			require.Len(t, got.Events, 1)
			assert.Equal(t, want, got.Events[0].Payload.(booking.PaymentSucceeded).Amount, received)
		}
	})
	t.Run("a dispute naming neither charge nor payment intent links to nothing: quarantined", func(t *testing.T) {
		body := strings.NewReplacer(`"charge": "`+chCal+`"`, `"charge": null`, `"payment_intent": "`+piCal+`"`, `"payment_intent": null`).Replace(disputed)
		require.NotContains(t, body, chCal)
		require.NotContains(t, body, piCal)
		_, err := mapBody(t, []byte(body))
		assert.ErrorIs(t, err, providers.ErrUnmappable)
	})
	t.Run("an object that does not say what it is: quarantined", func(t *testing.T) {
		body := strings.Replace(succeeded, `"object": "payment_intent",`, ``, 1)
		require.NotEqual(t, succeeded, body)
		_, err := mapBody(t, []byte(body))
		assert.ErrorIs(t, err, providers.ErrUnmappable)
	})
}
