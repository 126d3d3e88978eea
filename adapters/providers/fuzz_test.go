package providers_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"bookingledger/adapters/providers"
)

// FuzzParseTimestampedSignatures: the shared "t=…,v1=…" parser (Calendly, Stripe) must never panic,
// must fail only with ErrMalformedHeader, and on success must return one timestamp whose raw text
// occurs in the header, and between 1 and 8 signatures of 32 bytes.
func FuzzParseTimestampedSignatures(f *testing.F) {
	f.Add("t=1492774577,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd,v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39")
	f.Add("t=1715677951,v1=a0dba551ceb7e9197ccecfa31ad9958ae83a26aa327c60c6ef6459b760a1353e")
	f.Add("t=1,v1=" + strings.Repeat("0", 64) + ",v1=" + strings.Repeat("f", 64))
	f.Add("")
	f.Add(",=,")
	f.Add("t==1,v1==")
	f.Fuzz(func(t *testing.T, header string) {
		got, err := providers.ParseTimestampedSignatures(header)
		if err != nil {
			assert.ErrorIs(t, err, providers.ErrMalformedHeader)
			return
		}
		assert.Contains(t, header, "t="+got.Raw)
		assert.NotEmpty(t, got.V1)
		assert.LessOrEqual(t, len(got.V1), 8)
		for _, s := range got.V1 {
			assert.Len(t, s, 32)
		}
	})
}

// FuzzParseSecrets: whatever the environment value, no secret is empty or padded, and printing the
// list shows none of them.
func FuzzParseSecrets(f *testing.F) {
	f.Add("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, old-key ,,")
	f.Add("")
	f.Add(" , ")
	f.Fuzz(func(t *testing.T, env string) {
		s := providers.ParseSecrets(env)
		n := 0
		for _, v := range s.All() {
			assert.NotEmpty(t, v)
			assert.Equal(t, strings.TrimSpace(v), v)
			assert.NotContains(t, v, ",")
			n++
		}
		// Printed forms are made of the count and fixed text only.
		assert.Equal(t, fmt.Sprintf("secrets[%d]", n), s.String())
		assert.Equal(t, fmt.Sprintf("providers.Secrets{%d}", n), s.GoString())
	})
}
