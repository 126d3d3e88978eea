package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Scope is what a token may do.
type Scope string

// Scopes. Admin implies read.
const (
	ScopeRead  Scope = "read"
	ScopeAdmin Scope = "admin"
)

// Scopes lists every scope: api_tokens.scope's CHECK list (a test compares them).
var Scopes = []Scope{ScopeRead, ScopeAdmin}

// ParseScope accepts "read" or "admin".
func ParseScope(s string) (Scope, error) {
	switch Scope(s) {
	case ScopeRead, ScopeAdmin:
		return Scope(s), nil
	}
	return "", fmt.Errorf("%w: scope %q (want read or admin)", ErrInvalidToken, s)
}

// Allows reports whether a token of scope s may do what needs scope need.
func (s Scope) Allows(need Scope) bool {
	return s == ScopeAdmin || (s == ScopeRead && need == ScopeRead)
}

// Token is a stored token; its secret is never kept, only SecretHash.
type Token struct {
	ID         string
	Name       string
	Scope      Scope
	SecretHash []byte // SHA-256 of the secret part
	CreatedAt  time.Time
	ExpiresAt  time.Time // zero: never
	RevokedAt  time.Time // zero: not revoked
	LastUsedAt time.Time // zero: never used
}

// Expired reports whether the token is past its expiry at now.
func (t Token) Expired(now time.Time) bool { return !t.ExpiresAt.IsZero() && !now.Before(t.ExpiresAt) }

// Revoked reports whether the token was revoked.
func (t Token) Revoked() bool { return !t.RevokedAt.IsZero() }

// Errors callers branch on.
var (
	ErrInvalidToken = errors.New("invalid token")
	ErrExpired      = errors.New("token expired")
	ErrRevoked      = errors.New("token revoked")
	ErrNotFound     = errors.New("not found")
	ErrNameTaken    = errors.New("an active token has that name")
)

// Token format: prefix, 12 hex characters of id, "_", 43 base64url characters of secret.
const (
	tokenPrefix = "blt_"
	idBytes     = 6
	secretBytes = 32
	// MaxNameLength bounds a token's name (bytes).
	MaxNameLength = 64
)

// ValidateName checks a token name: what resolutions record as who resolved, so it must be printable.
func ValidateName(name string) error {
	if name == "" || len(name) > MaxNameLength || !utf8.ValidString(name) {
		return fmt.Errorf("%w: name must be 1 to %d bytes of UTF-8", ErrInvalidToken, MaxNameLength)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: name must not contain control characters", ErrInvalidToken)
		}
	}
	return nil
}

// NewToken makes a token named name of scope, valid for ttl from now (zero: no expiry). It returns the
// plaintext, to be shown once, and the record to store.
func NewToken(name string, scope Scope, now time.Time, ttl time.Duration) (string, Token, error) {
	if err := ValidateName(name); err != nil {
		return "", Token{}, err
	}
	if _, err := ParseScope(string(scope)); err != nil {
		return "", Token{}, err
	}
	if ttl < 0 {
		return "", Token{}, fmt.Errorf("%w: negative lifetime", ErrInvalidToken)
	}
	var id [idBytes]byte
	var secret [secretBytes]byte
	// crypto/rand.Read never fails (Go 1.24+): it crashes the program instead of returning short.
	_, _ = rand.Read(id[:])
	_, _ = rand.Read(secret[:])
	s := base64.RawURLEncoding.EncodeToString(secret[:])
	t := Token{ID: hex.EncodeToString(id[:]), Name: name, Scope: scope, SecretHash: hashSecret(s), CreatedAt: now.UTC()}
	if ttl > 0 {
		t.ExpiresAt = now.Add(ttl).UTC()
	}
	return tokenPrefix + t.ID + "_" + s, t, nil
}

// parseToken splits a presented token into its id and secret; it says nothing about validity.
func parseToken(s string) (id, secret string, ok bool) {
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok || len(rest) != 2*idBytes+1+base64.RawURLEncoding.EncodedLen(secretBytes) || rest[2*idBytes] != '_' {
		return "", "", false
	}
	id, secret = rest[:2*idBytes], rest[2*idBytes+1:]
	if _, err := hex.DecodeString(id); err != nil || strings.ToLower(id) != id {
		return "", "", false
	}
	return id, secret, true
}

func hashSecret(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// secretMatches compares in constant time; want of the wrong length (an unknown id) still costs a
// hash, so that timing does not tell a known id from an unknown one.
func secretMatches(secret string, want []byte) bool {
	got := hashSecret(secret)
	if len(want) != len(got) {
		want = make([]byte, len(got))
		subtle.ConstantTimeCompare(got, want)
		return false
	}
	return subtle.ConstantTimeCompare(got, want) == 1
}

// ParseLifetime reads a token lifetime: a Go duration (36h) or a number of days (90d).
func ParseLifetime(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(d, "%d", &n); err != nil || n <= 0 || n > 3650 || fmt.Sprint(n) != d {
			return 0, fmt.Errorf("lifetime %q: want a number of days from 1 to 3650 (90d) or a duration (36h)", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("lifetime %q: want a number of days (90d) or a positive duration (36h)", s)
	}
	return v, nil
}
