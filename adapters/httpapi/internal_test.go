package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

func TestErrorTableMapsWrappedErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{ErrUnknownProvider, http.StatusNotFound, "unknown_provider"},
		{ErrBodyTooLarge, http.StatusRequestEntityTooLarge, "body_too_large"},
		{providers.ErrNoSecret, http.StatusUnauthorized, "no_secret"},
		{providers.ErrMissingHeader, http.StatusUnauthorized, "missing_header"},
		{providers.ErrMalformedHeader, http.StatusUnauthorized, "malformed_header"},
		{providers.ErrBadSignature, http.StatusUnauthorized, "bad_signature"},
		{providers.ErrStale, http.StatusUnauthorized, "stale_timestamp"},
		{verificationError(fmt.Errorf("odd verifier")), http.StatusUnauthorized, "verification_failed"},
		{ledger.ErrContention, http.StatusServiceUnavailable, "contention"},
		{eventlog.ErrVersionConflict, http.StatusServiceUnavailable, "contention"},
		{eventlog.ErrUnavailable, http.StatusServiceUnavailable, "store_unavailable"},
		{context.DeadlineExceeded, http.StatusServiceUnavailable, "timeout"},
		{context.Canceled, http.StatusServiceUnavailable, "canceled"},
		{fmt.Errorf("something nobody expected"), http.StatusServiceUnavailable, "store_error"},
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			row := classify(fmt.Errorf("record delivery x: %w", tc.err))
			assert.Equal(t, tc.status, row.status)
			assert.Equal(t, tc.code, row.code)
			assert.NotEmpty(t, row.err.Error())
		})
	}
}

func TestVerificationErrorKeepsKnownReasons(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("%w: no v1", providers.ErrBadSignature)
	assert.Equal(t, "bad_signature", classify(verificationError(err)).code)
}

func TestTokenBucket(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newTokenBucket(6, t0) // burst 6, one token per 10 s
	for i := range 6 {
		assert.True(t, b.allow(t0), "token %d of the burst", i)
	}
	assert.False(t, b.allow(t0), "burst exhausted")
	assert.False(t, b.allow(t0.Add(9*time.Second)), "not yet refilled")
	assert.True(t, b.allow(t0.Add(10*time.Second)), "one token after 10 s")
	assert.False(t, b.allow(t0.Add(10*time.Second)))
	assert.False(t, b.allow(t0.Add(5*time.Second)), "a clock going backwards refills nothing")
	later := t0.Add(time.Hour)
	n := 0
	for b.allow(later) {
		n++
	}
	assert.Equal(t, 6, n, "refill is capped at the burst")
}

// The allowlist is spelled as http.Server canonicalises names (else it would never match) and a
// sender's headers cannot grow a receipt without bound.
func TestReceiptHeadersKeepTheAllowlistBounded(t *testing.T) {
	t.Parallel()
	for _, name := range keptHeaders {
		assert.Equal(t, http.CanonicalHeaderKey(name), name)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer x")
	h.Set("X-Forwarded-For", "203.0.113.1")
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "a\x00b"+strings.Repeat("é", maxKeptHeaderValueBytes))
	for i := range 2 * maxKeptHeaderValues {
		h.Add("Webhook-Signature", fmt.Sprintf("v1,%d", i))
	}
	got := receiptHeaders(h)
	require.Len(t, got, maxKeptHeaderValues)
	assert.Equal(t, ledger.Header{Name: "Content-Type", Value: "application/json"}, got[0])
	ua := got[slices.IndexFunc(got, func(h ledger.Header) bool { return h.Name == "User-Agent" })].Value
	assert.True(t, strings.HasPrefix(ua, "a b"), "made storable: %q", ua[:8])
	assert.LessOrEqual(t, len(ua), maxKeptHeaderValueBytes+len("…"))
	for _, kept := range got {
		assert.NotContains(t, []string{"Authorization", "X-Forwarded-For"}, kept.Name)
	}
}
