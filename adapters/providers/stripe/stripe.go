package stripe

import (
	"context"
	"net/http"
	"time"

	"bookingledger/adapters/providers"
)

const (
	// Name is the provider name: the path segment of POST /webhooks/stripe and Event.Provider.
	Name = "stripe"
	// SignatureHeader carries "t=<unix>,v1=<hex>[,v1=<hex>…][,v0=…]".
	SignatureHeader = "Stripe-Signature"
	// DefaultTolerance is the default of Stripe's own libraries.
	DefaultTolerance = 300 * time.Second
)

// Provider verifies and maps Stripe events. It holds no mutable state: safe for concurrent use.
type Provider struct {
	secrets providers.Secrets
	tol     providers.Tolerance
}

var _ providers.Provider = (*Provider)(nil)

// New returns a provider checking signatures with the endpoint secrets (whsec_…, newest first) and
// accepting signed timestamps up to tolerance old — and no more than tolerance in the future, so a
// forged far-future stamp cannot stay fresh. tolerance <= 0 means DefaultTolerance. With no secret
// every request fails with ErrNoSecret.
func New(secrets providers.Secrets, tolerance time.Duration) *Provider {
	return &Provider{secrets: secrets, tol: providers.ToleranceOr(tolerance, DefaultTolerance)}
}

// Name returns "stripe".
func (p *Provider) Name() string { return Name }

// Verify checks Stripe-Signature over "<t>." + body, keyed with each secret string as-is (not
// base64-decoded). Any v1 may match; other schemes are ignored.
func (p *Provider) Verify(h http.Header, body []byte, now time.Time) (providers.Verified, error) {
	return providers.VerifyTimestamped(p.secrets, SignatureHeader, h.Get(SignatureHeader), body, now, p.tol)
}

// Map turns a verified event into booking events; see mapBody.
func (p *Provider) Map(_ context.Context, _ http.Header, body []byte, _ time.Time) (providers.Mapped, error) {
	return mapBody(body)
}

// Sign builds a Stripe-Signature value with one v1 for body signed at t, as Stripe does: for the send
// command and ingress tests. During a secret roll Stripe sends one v1 per active secret; join two
// Sign results' v1 elements to imitate it.
func Sign(secret string, t time.Time, body []byte) string {
	return providers.SignTimestamped(secret, t, body)
}
