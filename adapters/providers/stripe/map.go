package stripe

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"bookingledger/adapters/providers"
	"bookingledger/domain/booking"
)

// Stripe event types this package maps.
const (
	TypePaymentIntentSucceeded   = "payment_intent.succeeded"
	TypePaymentIntentFailed      = "payment_intent.payment_failed"
	TypeChargeRefunded           = "charge.refunded"
	TypeCheckoutSessionCompleted = "checkout.session.completed"
	TypeChargeDisputeCreated     = "charge.dispute.created"
)

// objectOf is the Stripe object each mapped event type carries: the one list of what is mapped.
var objectOf = map[string]string{
	TypePaymentIntentSucceeded:   "payment_intent",
	TypePaymentIntentFailed:      "payment_intent",
	TypeChargeRefunded:           "charge",
	TypeCheckoutSessionCompleted: "checkout.session",
	TypeChargeDisputeCreated:     "dispute",
}

// Types lists the event types this package maps, sorted; any other type is recorded as ignored.
func Types() []string {
	return slices.Sorted(maps.Keys(objectOf))
}

// MetadataBookingKey is the metadata key (on the PaymentIntent, Charge or Checkout Session) that names
// the bookingledger booking a payment belongs to, e.g. "calcom-<uid>".
const MetadataBookingKey = "booking_id"

type event struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Object json.RawMessage `json:"object"`
	} `json:"data"`
}

// object holds the fields of payment_intent, charge, checkout.session and dispute objects that the
// ledger reads. Customer and card details are deliberately not decoded.
type object struct {
	ID                string         `json:"id"`
	Object            string         `json:"object"`
	Amount            int64          `json:"amount"`
	AmountReceived    int64          `json:"amount_received"`
	AmountRefunded    int64          `json:"amount_refunded"`
	AmountTotal       int64          `json:"amount_total"`
	Currency          string         `json:"currency"`
	Metadata          map[string]any `json:"metadata"`
	ClientReferenceID string         `json:"client_reference_id"`
	PaymentIntent     expandable     `json:"payment_intent"`
	Charge            expandable     `json:"charge"`
	LatestCharge      expandable     `json:"latest_charge"`
	PaymentStatus     string         `json:"payment_status"`
	Reason            string         `json:"reason"`
	LastPaymentError  *struct {
		Code        string `json:"code"`
		DeclineCode string `json:"decline_code"`
		Message     string `json:"message"`
	} `json:"last_payment_error"`
}

// expandable is a Stripe reference: an id string, or the expanded object carrying that id.
type expandable string

func (e *expandable) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*e = ""
		return nil
	case len(b) > 0 && b[0] == '{':
		var o struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		*e = expandable(o.ID)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*e = expandable(s)
	return nil
}

// mapBody maps one Stripe event.
//
// Identity (event ID input, also ProviderRef): "<data.object.id>:<type>", plus ":<amount_refunded>"
// for charge.refunded (each partial refund is a distinct change). The same business change re-sent as
// a different Event object (a different evt_ id) is therefore a duplicate. Time: the event's created
// (seconds). Delivery ID: the evt_ id.
func mapBody(body []byte) (providers.Mapped, error) {
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil {
		return providers.Mapped{}, providers.Unmappable("stripe body is not a JSON event: %v", err)
	}
	if err := providers.Token("id", ev.ID); err != nil {
		return providers.Mapped{}, err
	}
	if err := providers.Token("type", ev.Type); err != nil {
		return providers.Mapped{}, err
	}
	out := providers.Mapped{DeliveryID: ev.ID}

	want := objectOf[ev.Type]
	if want == "" {
		out.Reason = "stripe event type " + ev.Type + " not mapped"
		return out, nil
	}
	if ev.Created <= 0 {
		return providers.Mapped{}, providers.Unmappable("stripe %s: created missing", ev.Type)
	}
	occurred, err := providers.CheckTime("created", time.Unix(ev.Created, 0))
	if err != nil {
		return providers.Mapped{}, err
	}
	var o object
	if len(ev.Data.Object) == 0 || json.Unmarshal(ev.Data.Object, &o) != nil || string(ev.Data.Object) == "null" {
		return providers.Mapped{}, providers.Unmappable("stripe %s: data.object is not a %s", ev.Type, want)
	}
	if o.Object != want {
		return providers.Mapped{}, providers.Unmappable("stripe %s: data.object is a %q, want %q", ev.Type, o.Object, want)
	}
	if err := providers.Token("data.object.id", o.ID); err != nil {
		return providers.Mapped{}, err
	}

	currency := strings.ToUpper(o.Currency)
	identity := o.ID + ":" + ev.Type
	var (
		refs    []string
		payload booking.Payload
	)
	switch ev.Type {
	case TypePaymentIntentSucceeded:
		refs, err = paymentRefs(o.ID, string(o.LatestCharge))
		amount := o.AmountReceived
		if amount == 0 {
			amount = o.Amount
		}
		payload = booking.PaymentSucceeded{Refs: refs, Amount: amount, Currency: currency}
	case TypePaymentIntentFailed:
		refs, err = paymentRefs(o.ID, string(o.LatestCharge))
		payload = booking.PaymentFailed{Refs: refs, Reason: failure(o)}
	case TypeChargeRefunded:
		refs, err = paymentRefs(o.ID, string(o.PaymentIntent))
		identity += ":" + strconv.FormatInt(o.AmountRefunded, 10)
		payload = booking.PaymentRefunded{Refs: refs, Amount: o.AmountRefunded, Currency: currency}
	case TypeCheckoutSessionCompleted:
		if o.PaymentStatus != "paid" {
			out.Reason = "stripe " + ev.Type + " with payment_status " + strconv.Quote(o.PaymentStatus) + " not mapped (its payment_intent events are)"
			return out, nil
		}
		refs, err = paymentRefs(o.ID, string(o.PaymentIntent))
		payload = booking.PaymentSucceeded{Refs: refs, Amount: o.AmountTotal, Currency: currency}
	case TypeChargeDisputeCreated:
		refs, err = paymentRefs(string(o.Charge), string(o.PaymentIntent))
		payload = booking.PaymentDisputed{Refs: refs, Reason: o.Reason}
	}
	if err != nil {
		return providers.Mapped{}, err
	}
	if len(refs) == 0 {
		return providers.Mapped{}, providers.Unmappable("stripe %s: no payment id", ev.Type)
	}
	id, err := bookingOf(o)
	if err != nil {
		return providers.Mapped{}, err
	}
	out.Events = []booking.Event{{
		ID:          providers.EventID(Name, identity),
		Booking:     id,
		Provider:    Name,
		ProviderRef: identity,
		OccurredAt:  occurred,
		Payload:     payload,
	}}
	return out, nil
}

// paymentRefs turns the Stripe ids of one payment into sorted, distinct "stripe:<id>" refs.
func paymentRefs(ids ...string) ([]string, error) {
	var refs []string
	for _, id := range ids {
		if id == "" {
			continue
		}
		if err := providers.Token("stripe id", id); err != nil {
			return nil, err
		}
		if r := "stripe:" + id; !slices.Contains(refs, r) {
			refs = append(refs, r)
		}
	}
	slices.Sort(refs)
	return refs, nil
}

// bookingOf picks the booking stream: metadata.booking_id (validated: a wrong value is quarantined,
// not filed elsewhere), then a client_reference_id that is a bookingledger booking ID (merchants use
// that field for their own ids too, so anything else is not ours), else the payment's own stream
// "stripe-<payment intent>", "stripe-<charge>" or "stripe-<object id>".
func bookingOf(o object) (booking.ID, error) {
	if v, ok := o.Metadata[MetadataBookingKey]; ok && v != "" {
		s, isString := v.(string)
		if !isString {
			return "", providers.Unmappable("metadata.%s is not a string", MetadataBookingKey)
		}
		return providers.ParseBookingRef("metadata."+MetadataBookingKey, s)
	}
	if o.ClientReferenceID != "" {
		if id, err := providers.ParseBookingRef("client_reference_id", o.ClientReferenceID); err == nil {
			return id, nil
		}
	}
	key := string(o.PaymentIntent)
	switch {
	case o.Object == "payment_intent":
		key = o.ID
	case key == "" && o.Object == "dispute":
		key = string(o.Charge)
	case key == "":
		key = o.ID
	}
	id := booking.ID("stripe-" + key)
	if err := id.Validate(); err != nil {
		return "", providers.Unmappable("stripe payment stream: %v", err)
	}
	return id, nil
}

// failure summarises last_payment_error: "<code>/<decline_code>: <message>".
func failure(o object) string {
	e := o.LastPaymentError
	if e == nil {
		return ""
	}
	code := e.Code
	if e.DeclineCode != "" {
		code += "/" + e.DeclineCode
	}
	switch {
	case code == "":
		return e.Message
	case e.Message == "":
		return code
	}
	return code + ": " + e.Message
}
