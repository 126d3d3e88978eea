package calendly

import (
	"context"
	"net/http"
	"time"

	"bookingledger/adapters/providers"
)

const (
	// Name is the provider name: the path segment of POST /webhooks/calendly and Event.Provider.
	Name = "calendly"
	// SignatureHeader carries "t=<unix>,v1=<hex>".
	SignatureHeader = "Calendly-Webhook-Signature"
	// DefaultTolerance is the replay window of Calendly's own sample verifier.
	DefaultTolerance = 180 * time.Second
)

// Provider verifies and maps Calendly deliveries. It holds no mutable state: safe for concurrent use.
type Provider struct {
	secrets providers.Secrets
	tol     providers.Tolerance
}

var _ providers.Provider = (*Provider)(nil)

// New returns a provider checking signatures with the signing keys (newest first) and accepting
// signed timestamps within tolerance on either side of the receiver's clock; tolerance <= 0 means
// DefaultTolerance. With no key every request fails with ErrNoSecret.
func New(signingKeys providers.Secrets, tolerance time.Duration) *Provider {
	return &Provider{secrets: signingKeys, tol: providers.ToleranceOr(tolerance, DefaultTolerance)}
}

// Name returns "calendly".
func (p *Provider) Name() string { return Name }

// Verify checks Calendly-Webhook-Signature over "<t>." + body with each signing key.
func (p *Provider) Verify(h http.Header, body []byte, now time.Time) (providers.Verified, error) {
	return providers.VerifyTimestamped(p.secrets, SignatureHeader, h.Get(SignatureHeader), body, now, p.tol)
}

// Map turns a verified body into booking events; see mapBody.
func (p *Provider) Map(_ context.Context, _ http.Header, body []byte, _ time.Time) (providers.Mapped, error) {
	return mapBody(body)
}

// Sign builds the Calendly-Webhook-Signature value for body signed at t with signingKey, as Calendly
// does: for the send command and ingress tests.
func Sign(signingKey string, t time.Time, body []byte) string {
	return providers.SignTimestamped(signingKey, t, body)
}
