package calcom

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"bookingledger/adapters/providers"
)

const (
	// Name is the provider name: the path segment of POST /webhooks/calcom and Event.Provider.
	Name = "calcom"
	// SignatureHeader carries the lowercase hex HMAC-SHA256 of the raw body.
	SignatureHeader = "X-Cal-Signature-256"
	// VersionHeader carries the payload version (e.g. "2021-10-20"); informational.
	VersionHeader = "X-Cal-Webhook-Version"
	// NoSecretProvided is what Cal.com puts in SignatureHeader when the webhook has no secret.
	NoSecretProvided = "no-secret-provided"
)

// Provider verifies and maps Cal.com deliveries. It holds no mutable state: safe for concurrent use.
type Provider struct {
	secrets providers.Secrets
}

var _ providers.Provider = (*Provider)(nil)

// New returns a provider checking signatures with the secrets (newest first). There is no tolerance:
// Cal.com signs no timestamp, so a replayed body verifies — and is recognised as a duplicate by its
// event IDs. With no secret every request fails with ErrNoSecret.
func New(secrets providers.Secrets) *Provider {
	return &Provider{secrets: secrets}
}

// Name returns "calcom".
func (p *Provider) Name() string { return Name }

// Verify checks X-Cal-Signature-256 = hex(HMAC-SHA256(secret, body)) with each secret. SignedAt stays
// zero: nothing signed says when.
func (p *Provider) Verify(h http.Header, body []byte, _ time.Time) (providers.Verified, error) {
	if p.secrets.Empty() {
		return providers.Verified{}, providers.ErrNoSecret
	}
	sig, err := ParseSignature(h.Get(SignatureHeader))
	if err != nil {
		return providers.Verified{}, err
	}
	match := -1
	for i, s := range p.secrets.All() {
		if providers.MatchAny(providers.HMACSHA256([]byte(s), body), [][]byte{sig}) && match < 0 {
			match = i
		}
	}
	if match < 0 {
		return providers.Verified{}, fmt.Errorf("%w: X-Cal-Signature-256 matches none of %d secrets", providers.ErrBadSignature, p.secrets.Len())
	}
	return providers.VerifiedBy(p.secrets, match, time.Time{}), nil
}

// ParseSignature decodes an X-Cal-Signature-256 value. Cal.com's "no-secret-provided" placeholder is a
// bad signature with its own reason: the webhook at Cal.com has no secret set.
func ParseSignature(v string) ([]byte, error) {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		return nil, fmt.Errorf("%w: %s", providers.ErrMissingHeader, SignatureHeader)
	case v == NoSecretProvided:
		return nil, fmt.Errorf("%w: Cal.com sent no signature (%q): set a secret on the webhook at Cal.com", providers.ErrBadSignature, NoSecretProvided)
	}
	return providers.DecodeHexSHA256(v)
}

// Map turns a verified body into booking events; see mapBody.
func (p *Provider) Map(_ context.Context, _ http.Header, body []byte, _ time.Time) (providers.Mapped, error) {
	return mapBody(body)
}

// Sign returns the X-Cal-Signature-256 value for body, as Cal.com computes it: for the send command
// and ingress tests.
func Sign(secret string, body []byte) string {
	return hex.EncodeToString(providers.HMACSHA256([]byte(secret), body))
}
