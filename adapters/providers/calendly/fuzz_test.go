package calendly_test

import (
	"context"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/adapters/providers/providertest"
)

// FuzzVerify drives the signature-header parser and verifier with arbitrary headers and bodies. It
// must never panic, must fail only with a verification sentinel, and may succeed only when the header
// really carries the HMAC of "<t>." + body.
func FuzzVerify(f *testing.F) {
	vs := vectors(f)
	for _, v := range vs {
		f.Add(v.Header, v.body(f))
	}
	f.Add("t=1700000000,v1=", []byte("{}"))
	f.Add("t=,v1=00", []byte(nil))
	f.Add(",,,=,t=1,t=2", []byte("x"))
	f.Add("t=99999999999999999999,v1="+strings.Repeat("a", 64), []byte("x"))

	key := vs[0].Key
	p := calendly.New(providers.NewSecrets(otherKey, key), time.Duration(1<<62))
	f.Fuzz(func(t *testing.T, sig string, body []byte) {
		h := http.Header{}
		h.Set(calendly.SignatureHeader, sig)
		got, err := p.Verify(h, body, time.Unix(1715677951, 0))
		providertest.CheckVerifyError(t, err)
		if err != nil {
			return
		}
		require.Equal(t, 1, got.SecretIndex)
		want := calendly.Sign(key, got.SignedAt, body)
		mac := want[strings.Index(want, "v1=")+3:]
		assert.Contains(t, strings.ToLower(h.Get(calendly.SignatureHeader)), mac)
		_, err = hex.DecodeString(mac)
		assert.NoError(t, err)
	})
}

// FuzzMap feeds arbitrary bodies to the mapper: it must never panic, must be deterministic, and every
// result must keep the Map contract (see providertest.CheckMapped).
func FuzzMap(f *testing.F) {
	for _, name := range providertest.Glob(f, "*.json") {
		f.Add(providertest.ReadFile(f, name))
	}
	f.Add([]byte(`{"event":"invitee_no_show.deleted","created_at":"2024-01-01T00:00:00Z","payload":{"uri":"https://api.calendly.com/scheduled_events/A/invitees/B"}}`))
	f.Add([]byte(`{"event":"invitee.canceled","payload":{"uri":"x/invitees/y","rescheduled":true,"new_invitee":"x/invitees/y","updated_at":"2024-01-01T00:00:00Z"}}`))
	// An end in the year 10000 UTC (its event could not be encoded: 503 on every retry) and a limit
	// beyond the read model's int4 (the projection stopped at that event); found by reading.
	f.Add([]byte(`{"event":"invitee.created","created_at":"2024-01-01T00:00:00Z","payload":{"uri":"x/invitees/y","event":"m","scheduled_event":{"start_time":"9999-12-31T23:00:00Z","end_time":"9999-12-31T23:59:59-23:59","invitees_counter":{"limit":3000000000},"event_memberships":[{"user":"u"}]}}}`))
	f.Add([]byte(`{"event":"invitee_no_show.created","created_at":"9999-12-31T23:30:00-01:00","payload":{"uri":"x/invitees/y"}}`))
	// The zero time: Decide refuses it as no time at all, after the mapping accepted it.
	f.Add([]byte(`{"event":"invitee_no_show.deleted","created_at":"0001-01-01T00:00:00Z","payload":{"uri":"x/invitees/y"}}`))

	p := calendly.New(providers.NewSecrets("k"), 0)
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := p.Map(context.Background(), nil, body, time.Time{})
		providertest.CheckMapped(t, calendly.Name, m, err)
		again, err2 := p.Map(context.Background(), nil, body, time.Time{})
		assert.Equal(t, err, err2)
		assert.Equal(t, m, again)
	})
}
