package providers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"iter"
	"strings"
	"time"
)

// Secrets is an ordered list of signing secrets, newest first. Several are active during a rotation:
// the provider signs with the new one while the old one is still configured here.
//
// The values are unexported so that printing a Secrets (logs, %v, %#v) shows fingerprints only.
type Secrets struct {
	values []string
}

// ParseSecrets reads a comma-separated environment value, newest first. Entries are trimmed of spaces
// and empty entries are dropped, so "a, ,b," holds two secrets.
func ParseSecrets(env string) Secrets {
	return NewSecrets(strings.Split(env, ",")...)
}

// NewSecrets builds a list from values, newest first, trimming spaces and dropping empty entries.
func NewSecrets(values ...string) Secrets {
	var out []string
	for _, v := range values {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return Secrets{values: out}
}

// Len is the number of configured secrets; zero means the provider must reject every request.
func (s Secrets) Len() int { return len(s.values) }

// Empty reports whether no secret is configured.
func (s Secrets) Empty() bool { return len(s.values) == 0 }

// All yields the index and value of each secret, newest first.
func (s Secrets) All() iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		for i, v := range s.values {
			if !yield(i, v) {
				return
			}
		}
	}
}

// Fingerprints lists the fingerprint of each secret, newest first.
func (s Secrets) Fingerprints() []string {
	out := make([]string, len(s.values))
	for i, v := range s.values {
		out[i] = Fingerprint(v)
	}
	return out
}

// String shows fingerprints only, so that a Secrets printed by mistake leaks nothing.
func (s Secrets) String() string {
	return "secrets[" + strings.Join(s.Fingerprints(), ",") + "]"
}

// GoString keeps %#v from printing the values.
func (s Secrets) GoString() string {
	return "providers.Secrets{" + strings.Join(s.Fingerprints(), ",") + "}"
}

// Fingerprint identifies a secret in receipts and logs without revealing it: the first 8 hex
// characters of its SHA-256. 32 bits tell operators which configured secret matched; they are far too
// few to help anyone recover a secret of real entropy.
func Fingerprint(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:4])
}

// VerifiedBy describes a successful verification by the secret at index i of s.
func VerifiedBy(s Secrets, i int, signedAt time.Time) Verified {
	v := Verified{SecretIndex: i, SignedAt: signedAt}
	if i >= 0 && i < len(s.values) {
		v.SecretFingerprint = Fingerprint(s.values[i])
	}
	return v
}

// Label is the receipt form of a verification: "secret <index> (<fingerprint>)".
func (v Verified) Label() string {
	return fmt.Sprintf("secret %d (%s)", v.SecretIndex, v.SecretFingerprint)
}
