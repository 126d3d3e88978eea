package providers

import (
	"crypto/hmac"
	"crypto/sha256"
)

// HMACSHA256 is the HMAC-SHA256 of the concatenated parts under key. Taking parts avoids copying a
// large body only to prepend a timestamp.
func HMACSHA256(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// MatchAny reports whether want equals any candidate, in constant time per comparison
// (hmac.Equal) and without stopping at the first match, so the timing says nothing about which
// candidate matched.
func MatchAny(want []byte, candidates [][]byte) bool {
	ok := false
	for _, c := range candidates {
		if hmac.Equal(want, c) {
			ok = true
		}
	}
	return ok
}
