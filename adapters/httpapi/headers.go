package httpapi

import (
	"net/http"

	"bookingledger/domain/ledger"
)

// keptHeaders is the receipt's header policy, an allowlist: what says how a request was sent and
// signed (content type and encoding, the sender's user agent and request id, every provider's
// signature and delivery-identity headers) is kept; everything else is not. An allowlist rather than
// a denylist because a header nobody reviewed may carry a credential (Authorization, Cookie,
// Proxy-Authorization, an API key under any name) or personal data (X-Forwarded-For, X-Real-IP,
// Forwarded and other client addresses), and receipts are read by every operator. Signature headers
// are safe to keep: a signature proves nothing without the secret and its timestamp is already
// public.
var keptHeaders = []string{
	"Accept",
	"Accept-Encoding",
	"Calendly-Webhook-Signature",
	"Content-Encoding",
	"Content-Length",
	"Content-Type",
	"Stripe-Signature",
	"Svix-Id",
	"Svix-Signature",
	"Svix-Timestamp",
	"User-Agent",
	"Webhook-Id",
	"Webhook-Signature",
	"Webhook-Timestamp",
	"X-Acuity-Signature",
	"X-Cal-Signature-256",
	"X-Cal-Webhook-Version",
	"X-Request-Id",
}

// Bounds of the headers kept with one receipt: a sender controls them, and they must not grow a
// receipt past what a provider ever sends.
const (
	maxKeptHeaderValues     = 32
	maxKeptHeaderValueBytes = 1024
)

// receiptHeaders returns the headers of h that keptHeaders allows, in its (name) order, each value
// made storable and bounded.
func receiptHeaders(h http.Header) []ledger.Header {
	var out []ledger.Header
	for _, name := range keptHeaders {
		for _, v := range h[name] { // http.Server canonicalises incoming names, as keptHeaders spells them
			if len(out) == maxKeptHeaderValues {
				return out
			}
			out = append(out, ledger.Header{Name: name, Value: ledger.StorableText(v, maxKeptHeaderValueBytes)})
		}
	}
	return out
}
