package acuity_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/acuity"
	"bookingledger/adapters/providers/acuity/acuitytest"
	"bookingledger/adapters/providers/providertest"
)

type vector struct {
	Name      string `json:"name"`
	Key       string `json:"key"`
	Body      string `json:"body"`
	Signature string `json:"signature"`
}

func vectors(tb testing.TB) []vector { return providertest.Vectors[vector](tb) }

func sigHeader(sig string) http.Header {
	return providertest.SignatureHeader(acuity.SignatureHeader, sig)
}

const (
	userID   = "11145481"
	newerKey = "a-newer-acuity-api-key-not-yet-live"
)

// newProvider returns a provider with keys whose API is api (nil: an address nothing listens on).
func newProvider(t *testing.T, api *acuitytest.Server, keys ...string) *acuity.Provider {
	t.Helper()
	url := "http://127.0.0.1:1"
	if api != nil {
		url = api.URL
	}
	p, err := acuity.New(acuity.Config{
		Keys: providers.NewSecrets(keys...), UserID: userID, APIURL: url,
		Attempts: 3, AttemptTimeout: time.Second, Budget: 3 * time.Second, Backoff: 10 * time.Millisecond,
	})
	require.NoError(t, err)
	return p
}

func TestGoldenSignatures(t *testing.T) {
	for _, v := range vectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			body := []byte(v.Body)
			assert.Equal(t, v.Signature, acuity.Sign(v.Key, body))

			got, err := newProvider(t, nil, v.Key).Verify(sigHeader(v.Signature), body, time.Now())
			require.NoError(t, err)
			assert.Equal(t, providers.Verified{SecretIndex: 0}, got,
				"no timestamp is signed: SignedAt stays zero")

			got, err = newProvider(t, nil, newerKey, v.Key).Verify(sigHeader(v.Signature), body, time.Now())
			require.NoError(t, err)
			assert.Equal(t, 1, got.SecretIndex, "the older key of a rotation still verifies")
		})
	}
}

func TestVerify(t *testing.T) {
	vs := vectors(t)
	v := vs[0]
	body := []byte(v.Body)
	withSlash := vs[2] // its signature has '+' and '/', which URL-safe base64 writes differently
	require.True(t, strings.ContainsAny(withSlash.Signature, "+/"))
	urlSafe := base64.URLEncoding.EncodeToString(mustDecode(t, withSlash.Signature))
	tests := []struct {
		name    string
		keys    []string
		sig     string
		body    []byte
		wantErr error
	}{
		{name: "valid", keys: []string{v.Key}, sig: v.Signature, body: body},
		{name: "valid with surrounding spaces", keys: []string{v.Key}, sig: "  " + v.Signature + " ", body: body},
		{name: "no key configured", sig: v.Signature, body: body, wantErr: providers.ErrNoSecret},
		{name: "missing header", keys: []string{v.Key}, body: body, wantErr: providers.ErrMissingHeader},
		{name: "not base64", keys: []string{v.Key}, sig: "not base64!", body: body, wantErr: providers.ErrMalformedHeader},
		{name: "url-safe alphabet is not Acuity's", keys: []string{withSlash.Key}, sig: urlSafe, body: []byte(withSlash.Body), wantErr: providers.ErrMalformedHeader},
		{name: "nonzero padding bits (non-canonical base64)", keys: []string{v.Key}, sig: v.Signature[:42] + "7=", body: body, wantErr: providers.ErrMalformedHeader},
		{name: "line break inside (Go's decoder skips it)", keys: []string{v.Key}, sig: v.Signature[:43] + "\n" + v.Signature[43:], body: body, wantErr: providers.ErrMalformedHeader},
		{name: "CRLF inside", keys: []string{v.Key}, sig: v.Signature[:20] + "\r\n" + v.Signature[20:], body: body, wantErr: providers.ErrMalformedHeader},
		{name: "hex instead of base64", keys: []string{v.Key}, sig: strings.Repeat("ab", 32), body: body, wantErr: providers.ErrMalformedHeader},
		{name: "16 bytes", keys: []string{v.Key}, sig: base64.StdEncoding.EncodeToString(make([]byte, 16)), body: body, wantErr: providers.ErrMalformedHeader},
		{name: "very long header", keys: []string{v.Key}, sig: strings.Repeat("A", 4096), body: body, wantErr: providers.ErrMalformedHeader},
		{name: "wrong key", keys: []string{newerKey}, sig: v.Signature, body: body, wantErr: providers.ErrBadSignature},
		{name: "fields reordered", keys: []string{v.Key}, sig: v.Signature,
			body: []byte("id=1148237562&action=scheduled&calendarID=4417311&appointmentTypeID=21870436"), wantErr: providers.ErrBadSignature},
		{name: "other action, same id", keys: []string{v.Key}, sig: v.Signature,
			body: []byte(strings.Replace(v.Body, "scheduled", "canceled", 1)), wantErr: providers.ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Long after the fact: nothing signed says when, so time never matters.
			_, err := newProvider(t, nil, tt.keys...).Verify(sigHeader(tt.sig), tt.body, time.Now().Add(240*time.Hour))
			providertest.CheckVerifyError(t, err)
			if tt.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tt.wantErr)
		})
	}
}

func mustDecode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	return b
}

func TestNewRefusesBadConfiguration(t *testing.T) {
	_, err := acuity.New(acuity.Config{Keys: providers.NewSecrets("k")})
	assert.ErrorIs(t, err, acuity.ErrNoUserID)
	for _, u := range []string{"acuityscheduling.com/api/v1", "ftp://x/api", "https://user:pw@x/api", "https://x/api?x=1", "http://"} {
		_, err := acuity.New(acuity.Config{Keys: providers.NewSecrets("k"), UserID: "1", APIURL: u})
		require.Error(t, err, u)
		assert.NotContains(t, err.Error(), "pw", "the URL is not echoed")
	}
	p, err := acuity.New(acuity.Config{})
	require.NoError(t, err, "no keys: the provider is served and rejects everything")
	_, err = p.Verify(sigHeader("x"), nil, time.Now())
	assert.ErrorIs(t, err, providers.ErrNoSecret)
}

func TestConcurrentUse(t *testing.T) {
	api := acuitytest.New(t, userID, keyA)
	api.Put(appt(baseState()))
	p := newProvider(t, api, newerKey, keyA)
	body := []byte("action=changed&id=1148237562&calendarID=4417311&appointmentTypeID=21870436")
	providertest.CheckConcurrentUse(t, p, providertest.Delivery{
		Header: sigHeader(acuity.Sign(keyA, body)), Body: body, VerifyAt: time.Now(),
		ReceivedAt: time.Date(2025, 6, 10, 8, 0, 0, 0, time.UTC), SecretIndex: 1}, 20)
}
