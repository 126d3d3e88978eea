package standard

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"bookingledger/adapters/providers"
)

const (
	// Name is the provider name: the path segment of POST /webhooks/standard and Event.Provider.
	Name = "standard"
	// HeaderID is the message id: stable across retries, the idempotency key.
	HeaderID = "webhook-id"
	// HeaderTimestamp is the unix time of this attempt.
	HeaderTimestamp = "webhook-timestamp"
	// HeaderSignature is a space-separated list of "v1,<base64>" entries.
	HeaderSignature = "webhook-signature"
	// SvixHeaderID, SvixHeaderTimestamp and SvixHeaderSignature are the same three headers as Svix, the
	// most common Standard Webhooks sender, names them unless an account pays for white-labelled
	// webhook-* headers. Same scheme, same values, same identity.
	SvixHeaderID        = "svix-id"
	SvixHeaderTimestamp = "svix-timestamp"
	SvixHeaderSignature = "svix-signature"
	// SecretPrefix starts a Standard Webhooks secret; the rest is the base64 key.
	SecretPrefix = "whsec_"
	// DefaultTolerance is the reference libraries' window, applied on both sides.
	DefaultTolerance = 5 * time.Minute
)

// ErrInvalidSecret: a configured secret is not "whsec_" + base64 (or bare base64) of a non-empty key.
var ErrInvalidSecret = errors.New("invalid standard webhooks secret")

// maxSignatures bounds the v1 entries examined per request (rotations need two or three).
const maxSignatures = 8

// Provider verifies and maps Standard Webhooks deliveries. It holds no mutable state: safe for
// concurrent use.
type Provider struct {
	secrets providers.Secrets
	keys    [][]byte
	tol     providers.Tolerance
}

var _ providers.Provider = (*Provider)(nil)

// New returns a provider checking signatures with the secrets (newest first) and accepting
// webhook-timestamp within tolerance on either side of the receiver's clock; tolerance <= 0 means
// DefaultTolerance. A secret that does not decode is a configuration error, reported here (at
// startup) rather than as a failing request. With no secret every request fails with ErrNoSecret.
func New(secrets providers.Secrets, tolerance time.Duration) (*Provider, error) {
	p := &Provider{secrets: secrets, tol: providers.ToleranceOr(tolerance, DefaultTolerance)}
	for i, s := range secrets.All() {
		k, err := DecodeSecret(s)
		if err != nil {
			return nil, fmt.Errorf("standard webhooks secret %d: %w", i, err)
		}
		p.keys = append(p.keys, k)
	}
	return p, nil
}

// DecodeSecret returns the HMAC key of a secret: base64 after the optional "whsec_" prefix (padded or
// not).
func DecodeSecret(secret string) ([]byte, error) {
	s := strings.TrimPrefix(strings.TrimSpace(secret), SecretPrefix)
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if k, err = base64.RawStdEncoding.DecodeString(s); err != nil {
			return nil, fmt.Errorf("%w: not base64 after %q", ErrInvalidSecret, SecretPrefix)
		}
	}
	if len(k) == 0 {
		return nil, fmt.Errorf("%w: empty key", ErrInvalidSecret)
	}
	return k, nil
}

// Name returns "standard".
func (p *Provider) Name() string { return Name }

// Verify checks webhook-signature over "<webhook-id>.<webhook-timestamp>." + body with each key, then
// the timestamp (only once a signature matched, so ErrStale always means an authentic request).
func (p *Provider) Verify(h http.Header, body []byte, now time.Time) (providers.Verified, error) {
	if len(p.keys) == 0 {
		return providers.Verified{}, providers.ErrNoSecret
	}
	f := headerFamily(h)
	id, ts, sig := h.Get(f.id), h.Get(f.timestamp), h.Get(f.signature)
	for _, m := range []struct{ name, value string }{{f.id, id}, {f.timestamp, ts}, {f.signature, sig}} {
		if strings.TrimSpace(m.value) == "" {
			return providers.Verified{}, fmt.Errorf("%w: %s", providers.ErrMissingHeader, f.expected(m.name))
		}
	}
	if err := checkID(id); err != nil {
		return providers.Verified{}, err
	}
	signedAt, err := providers.ParseUnix(ts)
	if err != nil {
		return providers.Verified{}, err
	}
	sigs, err := ParseSignatures(sig)
	if err != nil {
		return providers.Verified{}, err
	}
	prefix := []byte(id + "." + ts + ".")
	match := -1
	for i, k := range p.keys {
		if providers.MatchAny(providers.HMACSHA256(k, prefix, body), sigs) && match < 0 {
			match = i
		}
	}
	if match < 0 {
		return providers.Verified{}, fmt.Errorf("%w: no v1 signature matches any of %d secrets", providers.ErrBadSignature, len(p.keys))
	}
	if err := p.tol.Check(signedAt, now); err != nil {
		return providers.Verified{}, err
	}
	return providers.VerifiedBy(p.secrets, match, signedAt), nil
}

// family is one naming of the three headers.
type family struct{ id, timestamp, signature string }

var (
	webhookFamily = family{HeaderID, HeaderTimestamp, HeaderSignature}
	svixFamily    = family{SvixHeaderID, SvixHeaderTimestamp, SvixHeaderSignature}
)

// headerFamily picks the headers a request is read from, as a whole: webhook-* when it has any of
// them, else svix-* when it has any of those. Never a mix, so that the id Verify checks the signature
// over is the id Map derives the identity from, and a retry under either family is the same delivery.
func headerFamily(h http.Header) family {
	for _, f := range []family{webhookFamily, svixFamily} {
		if h.Get(f.id) != "" || h.Get(f.timestamp) != "" || h.Get(f.signature) != "" {
			return f
		}
	}
	return webhookFamily
}

// expected names a missing header for the 401: with neither family present, both spellings.
func (f family) expected(name string) string {
	if f != webhookFamily {
		return name
	}
	svix := map[string]string{HeaderID: SvixHeaderID, HeaderTimestamp: SvixHeaderTimestamp, HeaderSignature: SvixHeaderSignature}[name]
	return name + " (or " + svix + ")"
}

// checkID keeps webhook-id usable as a delivery id and event identity: 1 to 256 printable ASCII
// characters without spaces.
func checkID(id string) error {
	if len(id) > 256 {
		return fmt.Errorf("%w: %s longer than 256 bytes", providers.ErrMalformedHeader, HeaderID)
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return fmt.Errorf("%w: %s has a character outside printable ASCII", providers.ErrMalformedHeader, HeaderID)
		}
	}
	return nil
}

// ParseSignatures decodes the v1 entries of a webhook-signature value ("v1,<base64> v1,<base64> …").
// Entries of other versions (v1a asymmetric signatures, future versions) are ignored; at least one v1
// is required, and each must be the base64 of 32 bytes. Errors wrap ErrMalformedHeader.
func ParseSignatures(v string) ([][]byte, error) {
	var out [][]byte
	for entry := range strings.FieldsSeq(v) {
		version, value, ok := strings.Cut(entry, ",")
		if !ok {
			return nil, fmt.Errorf("%w: entry is not <version>,<signature>", providers.ErrMalformedHeader)
		}
		if version != "v1" {
			continue
		}
		if len(out) == maxSignatures {
			return nil, fmt.Errorf("%w: more than %d v1 signatures", providers.ErrMalformedHeader, maxSignatures)
		}
		sig, err := providers.DecodeBase64SHA256(value)
		if err != nil {
			return nil, fmt.Errorf("v1 entry: %w", err)
		}
		out = append(out, sig)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no v1 signature", providers.ErrMalformedHeader)
	}
	return out, nil
}

// Map turns a verified body into booking events; see mapBody.
func (p *Provider) Map(_ context.Context, h http.Header, body []byte, _ time.Time) (providers.Mapped, error) {
	return mapBody(h.Get(headerFamily(h).id), body)
}

// Sign returns the webhook-signature value ("v1,<base64>") for a message, as a Standard Webhooks
// sender computes it: for the send command and ingress tests.
func Sign(secret, id string, t time.Time, body []byte) (string, error) {
	k, err := DecodeSecret(secret)
	if err != nil {
		return "", err
	}
	mac := providers.HMACSHA256(k, []byte(id+"."+strconv.FormatInt(t.Unix(), 10)+"."), body)
	return "v1," + base64.StdEncoding.EncodeToString(mac), nil
}

// Headers returns the three Standard Webhooks headers of a message signed with one secret.
func Headers(secret, id string, t time.Time, body []byte) (http.Header, error) {
	return SignedHeaders(id, t, body, secret)
}

// SignedHeaders returns the three Standard Webhooks headers of a message signed with every secret
// given (one "v1,<base64>" entry each, space-separated): a sender in the middle of a rotation signs
// with the old and the new secret, so a receiver holding either verifies it.
func SignedHeaders(id string, t time.Time, body []byte, secrets ...string) (http.Header, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: no secret to sign with", ErrInvalidSecret)
	}
	sigs := make([]string, 0, len(secrets))
	for _, s := range secrets {
		sig, err := Sign(s, id, t, body)
		if err != nil {
			return nil, err
		}
		sigs = append(sigs, sig)
	}
	h := http.Header{}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(t.Unix(), 10))
	h.Set(HeaderSignature, strings.Join(sigs, " "))
	return h, nil
}
