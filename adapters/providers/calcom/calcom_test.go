package calcom_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calcom"
	"bookingledger/adapters/providers/providertest"
)

type vector struct {
	Name      string `json:"name"`
	Secret    string `json:"secret"`
	BodyFile  string `json:"body_file"`
	Body      string `json:"body"`
	Signature string `json:"signature"`
}

func vectors(tb testing.TB) []vector { return providertest.Vectors[vector](tb) }

func (v vector) body(tb testing.TB) []byte { return providertest.Body(tb, v.BodyFile, v.Body) }

func header(sig string) http.Header { return providertest.SignatureHeader(calcom.SignatureHeader, sig) }

const otherSecret = "a-new-secret-not-yet-used-by-cal"

func TestGoldenSignatures(t *testing.T) {
	for _, v := range vectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			body := v.body(t)
			assert.Equal(t, v.Signature, calcom.Sign(v.Secret, body))

			got, err := calcom.New(providers.NewSecrets(v.Secret)).Verify(header(v.Signature), body, time.Now())
			require.NoError(t, err)
			assert.Equal(t, providers.Verified{SecretIndex: 0}, got,
				"no timestamp is signed: SignedAt stays zero")

			got, err = calcom.New(providers.NewSecrets(otherSecret, v.Secret)).Verify(header(v.Signature), body, time.Now())
			require.NoError(t, err)
			assert.Equal(t, 1, got.SecretIndex)
		})
	}
}

func TestVerify(t *testing.T) {
	v := vectors(t)[0]
	body := v.body(t)
	secrets := providers.NewSecrets(v.Secret)
	tests := []struct {
		name      string
		secrets   providers.Secrets
		sig       string
		body      []byte
		wantErr   error
		wantInMsg string
	}{
		{name: "valid", secrets: secrets, sig: v.Signature, body: body},
		{name: "valid long after the fact: nothing signed says when", secrets: secrets, sig: v.Signature, body: body},
		{name: "uppercase hex", secrets: secrets, sig: strings.ToUpper(v.Signature), body: body},
		{name: "no secret configured", secrets: providers.ParseSecrets(""), sig: v.Signature, body: body, wantErr: providers.ErrNoSecret},
		{name: "missing header", secrets: secrets, body: body, wantErr: providers.ErrMissingHeader},
		{name: "no-secret-provided", secrets: secrets, sig: "no-secret-provided", body: body, wantErr: providers.ErrBadSignature, wantInMsg: "Cal.com sent no signature"},
		{name: "not hex", secrets: secrets, sig: strings.Repeat("g", 64), body: body, wantErr: providers.ErrMalformedHeader},
		{name: "too short", secrets: secrets, sig: v.Signature[:63], body: body, wantErr: providers.ErrMalformedHeader},
		{name: "sha256= prefix is not Cal.com's format", secrets: secrets, sig: "sha256=" + v.Signature, body: body, wantErr: providers.ErrMalformedHeader},
		{name: "wrong secret", secrets: providers.NewSecrets(otherSecret), sig: v.Signature, body: body, wantErr: providers.ErrBadSignature},
		{name: "body re-serialized", secrets: secrets, sig: v.Signature, body: compact(t, body), wantErr: providers.ErrBadSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := calcom.New(tt.secrets).Verify(header(tt.sig), tt.body, time.Now().Add(240*time.Hour))
			providertest.CheckVerifyError(t, err)
			if tt.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tt.wantErr)
			assert.Contains(t, err.Error(), tt.wantInMsg)
		})
	}
}

func compact(tb testing.TB, body []byte) []byte {
	tb.Helper()
	var v any
	require.NoError(tb, json.Unmarshal(body, &v))
	out, err := json.Marshal(v)
	require.NoError(tb, err)
	require.NotEqual(tb, body, out)
	return out
}

func TestConcurrentUse(t *testing.T) {
	v := vectors(t)[0]
	p := calcom.New(providers.NewSecrets(otherSecret, v.Secret))
	providertest.CheckConcurrentUse(t, p, providertest.Delivery{
		Header: header(v.Signature), Body: v.body(t), VerifyAt: time.Now(), SecretIndex: 1}, 50)
}
