package standard_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/providertest"
	"bookingledger/adapters/providers/standard"
)

type delivery struct {
	BodyFile    string `json:"body_file"`
	ID          string `json:"id"`
	Timestamp   int64  `json:"timestamp"`
	SecretIndex int    `json:"secret_index"`
	Signature   string `json:"signature"`
}

type golden struct {
	Published struct {
		Secret    string `json:"secret"`
		ID        string `json:"id"`
		Timestamp int64  `json:"timestamp"`
		Body      string `json:"body"`
		Signature string `json:"signature"`
	} `json:"published"`
	Secrets    []string   `json:"secrets"`
	Deliveries []delivery `json:"deliveries"`
}

func readGolden(tb testing.TB) golden {
	tb.Helper()
	var g golden
	require.NoError(tb, json.Unmarshal(providertest.ReadFile(tb, "signatures.json"), &g))
	require.Len(tb, g.Secrets, 2)
	require.NotEmpty(tb, g.Deliveries)
	return g
}

func headers(id, ts, sig string) http.Header {
	h := http.Header{}
	for k, v := range map[string]string{standard.HeaderID: id, standard.HeaderTimestamp: ts, standard.HeaderSignature: sig} {
		if v != "" {
			h.Set(k, v)
		}
	}
	return h
}

func newProvider(tb testing.TB, tol time.Duration, secrets ...string) *standard.Provider {
	tb.Helper()
	p, err := standard.New(providers.NewSecrets(secrets...), tol)
	require.NoError(tb, err)
	return p
}

// The published Standard Webhooks test vector, spelled out here so that no testdata edit can weaken it.
func TestPublishedVector(t *testing.T) {
	const (
		secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		ts     = 1614265330
		body   = `{"test": 2432232314}`
		want   = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	got, err := standard.Sign(secret, id, time.Unix(ts, 0), []byte(body))
	require.NoError(t, err)
	assert.Equal(t, want, got)

	v, err := newProvider(t, 0, secret).Verify(headers(id, "1614265330", want), []byte(body), time.Unix(ts, 0))
	require.NoError(t, err)
	assert.Equal(t, providers.Verified{SecretIndex: 0, SignedAt: time.Unix(ts, 0).UTC()}, v)

	g := readGolden(t)
	assert.Equal(t, secret, g.Published.Secret)
	assert.Equal(t, want, g.Published.Signature)
}

func TestGoldenDeliveries(t *testing.T) {
	g := readGolden(t)
	p := newProvider(t, 0, g.Secrets...)
	for _, d := range g.Deliveries {
		t.Run(d.BodyFile, func(t *testing.T) {
			body := providertest.ReadFile(t, d.BodyFile)
			at := time.Unix(d.Timestamp, 0)
			sig, err := standard.Sign(g.Secrets[d.SecretIndex], d.ID, at, body)
			require.NoError(t, err)
			assert.Equal(t, d.Signature, sig)

			v, err := p.Verify(headers(d.ID, strconv.FormatInt(d.Timestamp, 10), d.Signature), body, at)
			require.NoError(t, err)
			assert.Equal(t, d.SecretIndex, v.SecretIndex, "rotation: the index of the secret that signed")

			h, err := standard.Headers(g.Secrets[d.SecretIndex], d.ID, at, body)
			require.NoError(t, err)
			assert.Equal(t, headers(d.ID, strconv.FormatInt(d.Timestamp, 10), d.Signature), h)
		})
	}
}

func TestNewRejectsUndecodableSecrets(t *testing.T) {
	for _, bad := range []string{"whsec_not*base64!", "whsec_", "whsec_===="} {
		_, err := standard.New(providers.NewSecrets("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", bad), 0)
		require.ErrorIs(t, err, standard.ErrInvalidSecret, bad)
		if key := bad[len("whsec_"):]; key != "" {
			assert.NotContains(t, err.Error(), key, "the error names the secret by index and fingerprint only")
		}
		assert.Contains(t, err.Error(), "secret 1")
	}
	// The prefix is optional, and unpadded base64 is accepted.
	k1, err := standard.DecodeSecret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	k2, err := standard.DecodeSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	assert.Equal(t, k1, k2)
	k3, err := standard.DecodeSecret("whsec_" + base64.RawStdEncoding.EncodeToString([]byte("sixteen byte key")))
	require.NoError(t, err)
	assert.Equal(t, []byte("sixteen byte key"), k3)
}

func TestVerify(t *testing.T) {
	g := readGolden(t)
	d := g.Deliveries[0]
	require.Equal(t, 0, d.SecretIndex)
	body := providertest.ReadFile(t, d.BodyFile)
	at := time.Unix(d.Timestamp, 0)
	ts := strconv.FormatInt(d.Timestamp, 10)
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("a different 32-byte signing key!"))
	otherSig, err := standard.Sign(other, d.ID, at, body)
	require.NoError(t, err)
	oneSecret := []string{g.Secrets[0]}

	tests := []struct {
		name       string
		secrets    []string
		tol        time.Duration
		id, ts, sg string
		body       []byte
		now        time.Time
		wantErr    error
		wantIndex  int
	}{
		{name: "valid", secrets: oneSecret, id: d.ID, ts: ts, sg: d.Signature, body: body, now: at},
		{name: "no secret configured", id: d.ID, ts: ts, sg: d.Signature, body: body, now: at, wantErr: providers.ErrNoSecret},
		{name: "missing webhook-id", secrets: oneSecret, ts: ts, sg: d.Signature, body: body, now: at, wantErr: providers.ErrMissingHeader},
		{name: "missing webhook-timestamp", secrets: oneSecret, id: d.ID, sg: d.Signature, body: body, now: at, wantErr: providers.ErrMissingHeader},
		{name: "missing webhook-signature", secrets: oneSecret, id: d.ID, ts: ts, body: body, now: at, wantErr: providers.ErrMissingHeader},
		{name: "timestamp not a number", secrets: oneSecret, id: d.ID, ts: "2024-06-11", sg: d.Signature, body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "entry without comma", secrets: oneSecret, id: d.ID, ts: ts, sg: strings.Replace(d.Signature, ",", "=", 1), body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "v1 not base64", secrets: oneSecret, id: d.ID, ts: ts, sg: "v1,***", body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "v1 with a line break inside", secrets: oneSecret, id: d.ID, ts: ts, sg: d.Signature[:20] + "\r" + d.Signature[20:], body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "v1 of the wrong length", secrets: oneSecret, id: d.ID, ts: ts, sg: "v1," + base64.StdEncoding.EncodeToString(make([]byte, 20)), body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "only v1a (asymmetric) entries", secrets: oneSecret, id: d.ID, ts: ts, sg: "v1a," + strings.TrimPrefix(d.Signature, "v1,"), body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "webhook-id with a control character", secrets: oneSecret, id: "msg_\x01", ts: ts, sg: d.Signature, body: body, now: at, wantErr: providers.ErrMalformedHeader},
		{name: "wrong secret", secrets: []string{other}, id: d.ID, ts: ts, sg: d.Signature, body: body, now: at, wantErr: providers.ErrBadSignature},
		{name: "body changed", secrets: oneSecret, id: d.ID, ts: ts, sg: d.Signature, body: append(body, ' '), now: at, wantErr: providers.ErrBadSignature},
		{name: "id changed", secrets: oneSecret, id: d.ID + "x", ts: ts, sg: d.Signature, body: body, now: at, wantErr: providers.ErrBadSignature},
		{name: "timestamp refreshed without re-signing", secrets: oneSecret, id: d.ID, ts: strconv.FormatInt(d.Timestamp+1, 10), sg: d.Signature, body: body, now: at, wantErr: providers.ErrBadSignature},
		{name: "rotation: second entry, second secret", secrets: []string{other, g.Secrets[0]}, id: d.ID, ts: ts, sg: otherSig[:3] + strings.Repeat("A", 43) + "= " + d.Signature, body: body, now: at, wantIndex: 1},
		{name: "rotation: sender signs with both", secrets: []string{g.Secrets[0]}, id: d.ID, ts: ts, sg: otherSig + " " + d.Signature, body: body, now: at},
		{name: "unknown versions ignored", secrets: oneSecret, id: d.ID, ts: ts, sg: "v2,abc " + d.Signature, body: body, now: at},
		{name: "5 min old is fresh", secrets: oneSecret, id: d.ID, ts: ts, sg: d.Signature, body: body, now: at.Add(5 * time.Minute)},
		{name: "stale", secrets: oneSecret, id: d.ID, ts: ts, sg: d.Signature, body: body, now: at.Add(5*time.Minute + time.Second), wantErr: providers.ErrStale},
		{name: "future", secrets: oneSecret, id: d.ID, ts: ts, sg: d.Signature, body: body, now: at.Add(-5*time.Minute - time.Second), wantErr: providers.ErrStale},
		{name: "configured tolerance", secrets: oneSecret, tol: 30 * time.Second, id: d.ID, ts: ts, sg: d.Signature, body: body, now: at.Add(31 * time.Second), wantErr: providers.ErrStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := newProvider(t, tt.tol, tt.secrets...).Verify(headers(tt.id, tt.ts, tt.sg), tt.body, tt.now)
			providertest.CheckVerifyError(t, err)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantIndex, got.SecretIndex)
		})
	}
}

func TestConcurrentUse(t *testing.T) {
	g := readGolden(t)
	d := g.Deliveries[len(g.Deliveries)-2]
	p := newProvider(t, 0, g.Secrets...)
	providertest.CheckConcurrentUse(t, p, providertest.Delivery{
		Header: headers(d.ID, strconv.FormatInt(d.Timestamp, 10), d.Signature), Body: providertest.ReadFile(t, d.BodyFile),
		VerifyAt: time.Unix(d.Timestamp, 0), SecretIndex: d.SecretIndex}, 50)
}

// Svix names the three headers svix-*; the scheme and the identity are the same.
func TestSvixHeaderFamily(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	p := newProvider(t, 0, secret)
	at := time.Unix(1614265330, 0)
	body := []byte(`{"type":"booking.canceled","timestamp":"2021-02-25T15:02:10Z","data":{"booking":"b1"}}`)
	sig, err := standard.Sign(secret, "msg_1", at, body)
	require.NoError(t, err)
	h := http.Header{}
	h.Set(standard.SvixHeaderID, "msg_1")
	h.Set(standard.SvixHeaderTimestamp, "1614265330")
	h.Set(standard.SvixHeaderSignature, sig)
	_, err = p.Verify(h, body, at)
	require.NoError(t, err)
	m, err := p.Map(t.Context(), h, body, at)
	require.NoError(t, err)
	assert.Equal(t, "msg_1", m.DeliveryID)
	wh, err := p.Map(t.Context(), headers("msg_1", "1614265330", sig), body, at)
	require.NoError(t, err)
	assert.Equal(t, wh.Events[0].ID, m.Events[0].ID, "same identity under either family")

	// The families are never mixed: a webhook-id next to svix-* headers makes it a webhook-* request.
	mixed := h.Clone()
	mixed.Set(standard.HeaderID, "msg_1")
	_, err = p.Verify(mixed, body, at)
	require.ErrorIs(t, err, providers.ErrMissingHeader)
	assert.Contains(t, err.Error(), standard.HeaderTimestamp)

	// With neither, the error names both spellings of the header expected.
	_, err = p.Verify(http.Header{}, body, at)
	require.ErrorIs(t, err, providers.ErrMissingHeader)
	assert.Contains(t, err.Error(), "webhook-id (or svix-id)")
}

func TestVerifyRules(t *testing.T) {
	g := readGolden(t)
	d := g.Deliveries[0]
	require.Equal(t, 0, d.SecretIndex)
	body := providertest.ReadFile(t, d.BodyFile)
	at := time.Unix(d.Timestamp, 0)
	ts := strconv.FormatInt(d.Timestamp, 10)
	signed := func(t *testing.T, id string, secrets ...string) http.Header {
		t.Helper()
		h, err := standard.SignedHeaders(id, at, body, secrets...)
		require.NoError(t, err)
		return h
	}

	t.Run("a sender mid-rotation signs with both secrets and both are configured: the newest is reported", func(t *testing.T) {
		got, err := newProvider(t, 0, g.Secrets...).Verify(signed(t, d.ID, g.Secrets[1], g.Secrets[0]), body, at)
		require.NoError(t, err)
		assert.Equal(t, 0, got.SecretIndex)
	})
	t.Run("webhook-id is 1 to 256 printable ASCII characters without spaces", func(t *testing.T) {
		p := newProvider(t, 0, g.Secrets[0])
		_, err := p.Verify(signed(t, strings.Repeat("m", 256), g.Secrets[0]), body, at)
		require.NoError(t, err)
		for name, id := range map[string]string{
			"257 bytes": strings.Repeat("m", 257),
			"space":     "msg 1",
			"DEL":       "msg\x7f1",
			"non-ASCII": "msg_é",
		} {
			// Signed over the id as sent: only the header rule can refuse it.
			_, err := p.Verify(signed(t, id, g.Secrets[0]), body, at)
			assert.ErrorIs(t, err, providers.ErrMalformedHeader, name)
		}
	})
	t.Run("eight v1 entries are a header, nine are not", func(t *testing.T) {
		p := newProvider(t, 0, g.Secrets[0])
		filler := "v1," + base64.StdEncoding.EncodeToString(make([]byte, 32)) + " "
		_, err := p.Verify(headers(d.ID, ts, strings.Repeat(filler, 7)+d.Signature), body, at)
		require.NoError(t, err)
		_, err = p.Verify(headers(d.ID, ts, strings.Repeat(filler, 8)+d.Signature), body, at)
		assert.ErrorIs(t, err, providers.ErrMalformedHeader)
	})
	t.Run("any webhook-* header next to svix-* ones makes it a webhook-* request", func(t *testing.T) {
		p := newProvider(t, 0, g.Secrets[0])
		sv := http.Header{}
		sv.Set(standard.SvixHeaderID, d.ID)
		sv.Set(standard.SvixHeaderTimestamp, ts)
		sv.Set(standard.SvixHeaderSignature, d.Signature)
		_, err := p.Verify(sv, body, at)
		require.NoError(t, err)
		for _, name := range []string{standard.HeaderTimestamp, standard.HeaderSignature} {
			mixed := sv.Clone()
			mixed.Set(name, sv.Get(map[string]string{standard.HeaderTimestamp: standard.SvixHeaderTimestamp, standard.HeaderSignature: standard.SvixHeaderSignature}[name]))
			_, err := p.Verify(mixed, body, at)
			assert.ErrorIs(t, err, providers.ErrMissingHeader, name)
		}
	})
}
