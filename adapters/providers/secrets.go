package providers

import (
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

// String shows how many secrets there are and nothing about them, so that a Secrets printed by
// mistake leaks nothing — not even a hash someone could test guesses of a weak secret against.
func (s Secrets) String() string {
	return fmt.Sprintf("secrets[%d]", len(s.values))
}

// GoString keeps %#v from printing the values.
func (s Secrets) GoString() string {
	return fmt.Sprintf("providers.Secrets{%d}", len(s.values))
}

// VerifiedBy describes a successful verification by the secret at index i of s.
func VerifiedBy(_ Secrets, i int, signedAt time.Time) Verified {
	return Verified{SecretIndex: i, SignedAt: signedAt}
}

// Label is the receipt form of a verification: "secret <index>", the position of the matching secret
// in its provider's configured list (0 = newest). The index alone: a fingerprint of the secret (until
// 2026-12 the first 8 hex digits of its unsalted SHA-256) would let anyone who reads receipts or
// histories test guesses of a weak secret offline. Receipts stored before keep their old text.
func (v Verified) Label() string {
	return fmt.Sprintf("secret %d", v.SecretIndex)
}
