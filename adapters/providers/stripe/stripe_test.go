package stripe_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/providertest"
	"bookingledger/adapters/providers/stripe"
)

type vector struct {
	Name     string   `json:"name"`
	Secrets  []string `json:"secrets"`
	T        int64    `json:"t"`
	BodyFile string   `json:"body_file"`
	Header   string   `json:"header"`
}

func vectors(tb testing.TB) []vector {
	tb.Helper()
	vs := providertest.Vectors[vector](tb)
	require.Len(tb, vs, 2)
	return vs
}

func header(sig string) http.Header { return providertest.SignatureHeader(stripe.SignatureHeader, sig) }

// v1 returns the v1 value of a one-signature header built by Sign.
func v1(header string) string { return header[strings.Index(header, "v1=")+3:] }

const unrelated = "whsec_unrelatedSecretNeverUsedBy0Stripe"

func TestGoldenSignatures(t *testing.T) {
	vs := vectors(t)

	t.Run(vs[0].Name, func(t *testing.T) {
		v := vs[0]
		body := providertest.ReadFile(t, v.BodyFile)
		at := time.Unix(v.T, 0)
		assert.Equal(t, v.Header, stripe.Sign(v.Secrets[0], at, body))

		got, err := stripe.New(providers.NewSecrets(v.Secrets[0]), 0).Verify(header(v.Header), body, at)
		require.NoError(t, err)
		assert.Equal(t, providers.Verified{SecretIndex: 0, SignedAt: at.UTC()}, got)

		got, err = stripe.New(providers.NewSecrets(unrelated, v.Secrets[0]), 0).Verify(header(v.Header), body, at)
		require.NoError(t, err)
		assert.Equal(t, 1, got.SecretIndex, "rotation: the second configured secret matched")
	})

	t.Run(vs[1].Name, func(t *testing.T) {
		v := vs[1]
		body := providertest.ReadFile(t, v.BodyFile)
		at := time.Unix(v.T, 0)
		for _, s := range v.Secrets {
			assert.Contains(t, v.Header, ",v1="+v1(stripe.Sign(s, at, body)))
		}
		// Either secret alone verifies the rolled header; the index reports the configured position.
		for _, tt := range []struct {
			secrets []string
			index   int
		}{
			{[]string{v.Secrets[0]}, 0},
			{[]string{v.Secrets[1]}, 0},
			{[]string{unrelated, v.Secrets[1]}, 1},
			{[]string{unrelated, v.Secrets[0], v.Secrets[1]}, 1},
		} {
			got, err := stripe.New(providers.NewSecrets(tt.secrets...), 0).Verify(header(v.Header), body, at)
			require.NoError(t, err)
			assert.Equal(t, tt.index, got.SecretIndex)
		}
	})
}

func TestVerify(t *testing.T) {
	v := vectors(t)[0]
	body := providertest.ReadFile(t, v.BodyFile)
	at := time.Unix(v.T, 0)
	ts := strconv.FormatInt(v.T, 10)
	sig := v1(v.Header)
	secrets := providers.NewSecrets(v.Secrets[0])
	tests := []struct {
		name    string
		secrets providers.Secrets
		tol     time.Duration
		header  string
		body    []byte
		now     time.Time
		wantErr error
	}{
		{name: "valid", secrets: secrets, header: v.Header, body: body, now: at},
		{name: "no secret configured", secrets: providers.ParseSecrets(","), header: v.Header, body: body, now: at, wantErr: providers.ErrNoSecret},
		{name: "missing header", secrets: secrets, body: body, now: at, wantErr: providers.ErrMissingHeader},
		{name: "only v0", secrets: secrets, header: "t=" + ts + ",v0=" + sig, body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "no timestamp", secrets: secrets, header: "v1=" + sig, body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "timestamp with fraction", secrets: secrets, header: "t=" + ts + ".5,v1=" + sig, body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "v1 not hex", secrets: secrets, header: "t=" + ts + ",v1=" + strings.Repeat("x", 64), body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "secret base64-decoded is not Stripe's key", secrets: providers.NewSecrets(strings.TrimPrefix(v.Secrets[0], "whsec_")), header: v.Header, body: body, now: at, wantErr: providers.ErrBadSignature},
		{name: "unrelated secret", secrets: providers.NewSecrets(unrelated), header: v.Header, body: body, now: at, wantErr: providers.ErrBadSignature},
		{name: "body re-serialized", secrets: secrets, header: v.Header, body: []byte(strings.Join(strings.Fields(string(body)), "")), now: at, wantErr: providers.ErrBadSignature},
		{name: "timestamp swapped", secrets: secrets, header: "t=" + strconv.FormatInt(v.T+60, 10) + ",v1=" + sig, body: body, now: at, wantErr: providers.ErrBadSignature},
		{name: "300 s old is still fresh", secrets: secrets, header: v.Header, body: body, now: at.Add(300 * time.Second)},
		{name: "stale", secrets: secrets, header: v.Header, body: body, now: at.Add(301 * time.Second), wantErr: providers.ErrStale},
		{name: "far future", secrets: secrets, header: v.Header, body: body, now: at.Add(-time.Hour), wantErr: providers.ErrStale},
		{name: "configured tolerance", secrets: secrets, tol: time.Hour, header: v.Header, body: body, now: at.Add(50 * time.Minute)},
		{name: "configured tolerance exceeded", secrets: secrets, tol: time.Minute, header: v.Header, body: body, now: at.Add(61 * time.Second), wantErr: providers.ErrStale},
		{name: "one good v1 among bad ones", secrets: secrets, header: "t=" + ts + ",v1=" + strings.Repeat("1", 64) + ",v1=" + sig, body: body, now: at},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := stripe.New(tt.secrets, tt.tol).Verify(header(tt.header), tt.body, tt.now)
			providertest.CheckVerifyError(t, err)
			if tt.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tt.wantErr)
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	v := vectors(t)[1]
	p := stripe.New(providers.NewSecrets(unrelated, v.Secrets[1]), 0)
	providertest.CheckConcurrentUse(t, p, providertest.Delivery{
		Header: header(v.Header), Body: providertest.ReadFile(t, v.BodyFile), VerifyAt: time.Unix(v.T, 0), SecretIndex: 1}, 50)
}
