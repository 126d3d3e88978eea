package calendly_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providers/providertest"
)

type vector struct {
	Name     string `json:"name"`
	Key      string `json:"key"`
	T        int64  `json:"t"`
	BodyFile string `json:"body_file"`
	Body     string `json:"body"`
	Header   string `json:"header"`
}

func vectors(tb testing.TB) []vector { return providertest.Vectors[vector](tb) }

func (v vector) body(tb testing.TB) []byte { return providertest.Body(tb, v.BodyFile, v.Body) }

func header(sig string) http.Header {
	return providertest.SignatureHeader(calendly.SignatureHeader, sig)
}

const otherKey = "a-retired-signing-key-that-no-longer-matches"

func TestGoldenSignatures(t *testing.T) {
	for _, v := range vectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			body := v.body(t)
			at := time.Unix(v.T, 0)
			assert.Equal(t, v.Header, calendly.Sign(v.Key, at, body))

			got, err := calendly.New(providers.NewSecrets(v.Key), 0).Verify(header(v.Header), body, at)
			require.NoError(t, err)
			assert.Equal(t, 0, got.SecretIndex)
			assert.True(t, at.Equal(got.SignedAt))

			// Rotation: the new key is configured first and does not match; the old one does.
			got, err = calendly.New(providers.NewSecrets(otherKey, v.Key), 0).Verify(header(v.Header), body, at)
			require.NoError(t, err)
			assert.Equal(t, 1, got.SecretIndex)
		})
	}
}

func TestVerify(t *testing.T) {
	v := vectors(t)[0]
	body := v.body(t)
	at := time.Unix(v.T, 0)
	sig := v.Header[strings.Index(v.Header, "v1=")+3:]
	ts := strconv.FormatInt(v.T, 10)
	keys := providers.NewSecrets(v.Key)

	tests := []struct {
		name    string
		secrets providers.Secrets
		tol     time.Duration
		header  string
		body    []byte
		now     time.Time
		wantErr error
	}{
		{name: "valid", secrets: keys, header: v.Header, body: body, now: at},
		{name: "no secret configured", secrets: providers.ParseSecrets(" , "), header: v.Header, body: body, now: at, wantErr: providers.ErrNoSecret},
		{name: "missing header", secrets: keys, body: body, now: at, wantErr: providers.ErrMissingHeader},
		{name: "blank header", secrets: keys, header: "  ", body: body, now: at, wantErr: providers.ErrMissingHeader},
		{name: "no t", secrets: keys, header: "v1=" + sig, body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "no v1", secrets: keys, header: "t=" + ts, body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "only v0", secrets: keys, header: "t=" + ts + ",v0=" + sig, body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "t not a number", secrets: keys, header: "t=abc,v1=" + sig, body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "negative t", secrets: keys, header: "t=-" + ts + ",v1=" + sig, body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "two t", secrets: keys, header: "t=" + ts + ",t=" + ts + ",v1=" + sig, body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "v1 not hex", secrets: keys, header: "t=" + ts + ",v1=" + strings.Repeat("zz", 32), body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "v1 truncated", secrets: keys, header: "t=" + ts + ",v1=" + sig[:40], body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "element without =", secrets: keys, header: "t=" + ts + ",v1", body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "wrong key", secrets: providers.NewSecrets(otherKey), header: v.Header, body: body, now: at, wantErr: providers.ErrBadSignature},
		{name: "body changed by one byte", secrets: keys, header: v.Header, body: append([]byte{' '}, body...), now: at, wantErr: providers.ErrBadSignature},
		{name: "t changed", secrets: keys, header: "t=" + strconv.FormatInt(v.T+1, 10) + ",v1=" + sig, body: body, now: at, wantErr: providers.ErrBadSignature},
		{name: "stale but authentic", secrets: keys, header: v.Header, body: body, now: at.Add(181 * time.Second), wantErr: providers.ErrStale},
		{name: "at the edge of the default tolerance", secrets: keys, header: v.Header, body: body, now: at.Add(180 * time.Second)},
		{name: "from the future", secrets: keys, header: v.Header, body: body, now: at.Add(-181 * time.Second), wantErr: providers.ErrStale},
		{name: "configured tolerance", secrets: keys, tol: 10 * time.Second, header: v.Header, body: body, now: at.Add(11 * time.Second), wantErr: providers.ErrStale},
		{name: "stale and forged is a bad signature", secrets: providers.NewSecrets(otherKey), header: v.Header, body: body, now: at.Add(time.Hour), wantErr: providers.ErrBadSignature},
		{name: "extra schemes and spaces ignored", secrets: keys, header: "t=" + ts + ", v0=" + strings.Repeat("0", 64) + ", v1=" + sig, body: body, now: at},
		{name: "any of several v1 may match", secrets: keys, header: "t=" + ts + ",v1=" + strings.Repeat("0", 64) + ",v1=" + sig, body: body, now: at},
		{name: "uppercase hex accepted", secrets: keys, header: "t=" + ts + ",v1=" + strings.ToUpper(sig), body: body, now: at},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := calendly.New(tt.secrets, tt.tol).Verify(header(tt.header), tt.body, tt.now)
			providertest.CheckVerifyError(t, err)
			if tt.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tt.wantErr)
		})
	}
}

func TestVerifyNeverLeaksSecret(t *testing.T) {
	v := vectors(t)[0]
	_, err := calendly.New(providers.NewSecrets(otherKey, v.Key), 0).Verify(header(v.Header), []byte("{}"), time.Unix(v.T, 0))
	require.ErrorIs(t, err, providers.ErrBadSignature)
	assert.NotContains(t, err.Error(), v.Key)
	assert.NotContains(t, err.Error(), otherKey)
}

func TestConcurrentUse(t *testing.T) {
	v := vectors(t)[0]
	p := calendly.New(providers.NewSecrets(otherKey, v.Key), 0)
	providertest.CheckConcurrentUse(t, p, providertest.Delivery{
		Header: header(v.Header), Body: v.body(t), VerifyAt: time.Unix(v.T, 0), SecretIndex: 1}, 50)
}
