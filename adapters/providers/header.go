package providers

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxHeaderSignatures bounds the v1 entries examined per request: rotations need two or three, and
// an unbounded list would let one request cost unbounded HMAC comparisons.
const maxHeaderSignatures = 8

// TimestampedSignatures is a parsed "t=<unix>,v1=<hex>[,v1=<hex>…]" header (Calendly, Stripe).
type TimestampedSignatures struct {
	Timestamp time.Time
	// Raw is the t value exactly as sent: the signed string starts with it, not with a reformatting.
	Raw string
	// V1 are the decoded HMAC-SHA256 signatures of the v1 scheme.
	V1 [][]byte
}

// ParseTimestampedSignatures parses a "t=…,v1=…" header. Exactly one t is required and at least one
// v1; every v1 must be 64 hex digits. Other schemes (v0, …) are ignored. Errors wrap
// ErrMalformedHeader.
func ParseTimestampedSignatures(header string) (TimestampedSignatures, error) {
	var out TimestampedSignatures
	seenT := false
	for item := range strings.SplitSeq(header, ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return TimestampedSignatures{}, fmt.Errorf("%w: element %q is not key=value", ErrMalformedHeader, Clip(item))
		}
		switch key {
		case "t":
			if seenT {
				return TimestampedSignatures{}, fmt.Errorf("%w: more than one t", ErrMalformedHeader)
			}
			seenT = true
			ts, err := ParseUnix(value)
			if err != nil {
				return TimestampedSignatures{}, err
			}
			out.Timestamp, out.Raw = ts, value
		case "v1":
			if len(out.V1) == maxHeaderSignatures {
				return TimestampedSignatures{}, fmt.Errorf("%w: more than %d v1 signatures", ErrMalformedHeader, maxHeaderSignatures)
			}
			sig, err := DecodeHexSHA256(value)
			if err != nil {
				return TimestampedSignatures{}, err
			}
			out.V1 = append(out.V1, sig)
		}
	}
	if !seenT {
		return TimestampedSignatures{}, fmt.Errorf("%w: no t timestamp", ErrMalformedHeader)
	}
	if len(out.V1) == 0 {
		return TimestampedSignatures{}, fmt.Errorf("%w: no v1 signature", ErrMalformedHeader)
	}
	return out, nil
}

// DecodeHexSHA256 decodes a hex HMAC-SHA256 (64 hex digits, either case). Errors wrap
// ErrMalformedHeader.
func DecodeHexSHA256(s string) ([]byte, error) {
	if len(s) != 2*32 {
		return nil, fmt.Errorf("%w: signature is %d characters, want 64 hex digits", ErrMalformedHeader, len(s))
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: signature is not hex", ErrMalformedHeader)
	}
	return b, nil
}

// DecodeBase64SHA256 decodes a standard-base64 HMAC-SHA256 (44 characters, padded). Only the one
// canonical spelling is accepted: Go's decoder skips CR and LF anywhere and Strict alone does not
// refuse them, so "…\n=" would otherwise stand for the same signature as "…=". Errors wrap
// ErrMalformedHeader.
func DecodeBase64SHA256(s string) ([]byte, error) {
	const want = 44 // base64 of 32 bytes, padded
	if len(s) != want {
		return nil, fmt.Errorf("%w: signature is %d characters, want %d base64 characters", ErrMalformedHeader, len(s), want)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != 32 || base64.StdEncoding.EncodeToString(b) != s {
		return nil, fmt.Errorf("%w: signature is not the base64 of 32 bytes", ErrMalformedHeader)
	}
	return b, nil
}

// VerifyTimestamped checks a "t=…,v1=…" header over "<t>." + body with HMAC-SHA256 keyed with each
// secret's bytes as-is (Calendly signing keys, Stripe whsec_ strings), newest first. Any v1 may match
// any secret; the first matching secret is reported. The timestamp is checked only once a signature
// matched, so ErrStale always means an authentic but old (or early) request — a clock or replay
// problem worth a different alarm than a forgery. name is the header's name, for the error of a
// request without it.
func VerifyTimestamped(secrets Secrets, name, header string, body []byte, now time.Time, tol Tolerance) (Verified, error) {
	if secrets.Empty() {
		return Verified{}, ErrNoSecret
	}
	if strings.TrimSpace(header) == "" {
		return Verified{}, fmt.Errorf("%w: %s", ErrMissingHeader, name)
	}
	h, err := ParseTimestampedSignatures(header)
	if err != nil {
		return Verified{}, err
	}
	prefix := []byte(h.Raw + ".")
	match := -1
	for i, s := range secrets.All() {
		if MatchAny(HMACSHA256([]byte(s), prefix, body), h.V1) && match < 0 {
			match = i
		}
	}
	if match < 0 {
		return Verified{}, fmt.Errorf("%w: no v1 signature matches any of %d secrets", ErrBadSignature, secrets.Len())
	}
	if err := tol.Check(h.Timestamp, now); err != nil {
		return Verified{}, err
	}
	return VerifiedBy(secrets, match, h.Timestamp), nil
}

// SignTimestamped builds a "t=<unix>,v1=<hex>" header for body, as Calendly and Stripe do.
func SignTimestamped(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(HMACSHA256([]byte(secret), []byte(ts+"."), body))
}
