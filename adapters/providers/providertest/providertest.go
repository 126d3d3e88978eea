package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/providers"
	"bookingledger/domain/booking"
)

// ReadFile returns the raw bytes of testdata/<name>.
func ReadFile(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(tb, err)
	return b
}

// Vectors reads the golden signature vectors of a provider package: testdata/signatures.json holds
// {"vectors": [...]} in the package's own vector shape V. It fails the test when there are none.
func Vectors[V any](tb testing.TB) []V {
	tb.Helper()
	var doc struct {
		Vectors []V `json:"vectors"`
	}
	require.NoError(tb, json.Unmarshal(ReadFile(tb, "signatures.json"), &doc))
	require.NotEmpty(tb, doc.Vectors)
	return doc.Vectors
}

// Body returns a vector's body: the named testdata file, else the inline text.
func Body(tb testing.TB, file, inline string) []byte {
	tb.Helper()
	if file != "" {
		return ReadFile(tb, file)
	}
	return []byte(inline)
}

// SignatureHeader returns a header set with name: sig, or an empty header when sig is empty (a
// request without a signature).
func SignatureHeader(name, sig string) http.Header {
	h := http.Header{}
	if sig != "" {
		h.Set(name, sig)
	}
	return h
}

// Glob lists testdata files matching pattern (e.g. "*.json"), by base name.
func Glob(tb testing.TB, pattern string) []string {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", pattern))
	require.NoError(tb, err)
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	return names
}

// VerifySentinels are the errors Verify may return (wrapped).
func VerifySentinels() []error {
	return []error{providers.ErrNoSecret, providers.ErrMissingHeader, providers.ErrMalformedHeader,
		providers.ErrBadSignature, providers.ErrStale}
}

// CheckVerifyError asserts that a Verify error wraps exactly one of the verification sentinels, so the
// ingress can always answer 401 with a reason.
func CheckVerifyError(tb testing.TB, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	n := 0
	for _, s := range VerifySentinels() {
		if errors.Is(err, s) {
			n++
		}
	}
	assert.Equal(tb, 1, n, "verify error %q must wrap exactly one sentinel", err)
}

// CheckMapped asserts the contract of a Map result: an error wraps ErrUnmappable; otherwise there is
// a delivery id, no events comes with a reason, and every event is accepted by booking.Decide on an
// empty state, can be stored (the event codec encodes it), belongs to the provider, and carries the
// ID derived from its ProviderRef.
func CheckMapped(tb testing.TB, provider string, m providers.Mapped, err error) {
	tb.Helper()
	if err != nil {
		assert.ErrorIs(tb, err, providers.ErrUnmappable)
		return
	}
	assert.NotEmpty(tb, m.DeliveryID, "delivery id")
	if len(m.Events) == 0 {
		assert.NotEmpty(tb, m.Reason, "an ignored delivery says why")
	}
	for _, e := range m.Events {
		assert.Equal(tb, provider, e.Provider)
		assert.Equal(tb, providers.EventID(provider, e.ProviderRef), e.ID, "event id derives from ProviderRef %q", e.ProviderRef)
		_, derr := booking.Decide(booking.State{}, e)
		assert.NoError(tb, derr, "mapped event must be valid for the domain: %+v", e)
		_, eerr := eventcodec.JSON{}.Encode(e)
		assert.NoError(tb, eerr, "mapped event must be storable: %+v", e)
	}
}

// IDs lists the event IDs of mapped deliveries, in order.
func IDs(ms ...providers.Mapped) []string {
	var out []string
	for _, m := range ms {
		for _, e := range m.Events {
			out = append(out, e.ID.String())
		}
	}
	return out
}

// Delivery is one signed request as a provider's tests send it.
type Delivery struct {
	Header      http.Header
	Body        []byte
	VerifyAt    time.Time // the clock Verify is given
	ReceivedAt  time.Time // the receive time Map is given
	SecretIndex int       // the secret Verify must report as matched
}

// CheckConcurrentUse calls Verify and Map on one provider from 8 goroutines at once, rounds times each
// (run it under -race): every call must verify with the expected secret and map to what a single call
// maps, as the ingress shares one provider between all requests.
func CheckConcurrentUse(t *testing.T, p providers.Provider, d Delivery, rounds int) {
	t.Helper()
	want, err := p.Map(context.Background(), d.Header, d.Body, d.ReceivedAt)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range rounds {
				got, err := p.Verify(d.Header, d.Body, d.VerifyAt)
				assert.NoError(t, err)
				assert.Equal(t, d.SecretIndex, got.SecretIndex)
				m, err := p.Map(context.Background(), d.Header, d.Body, d.ReceivedAt)
				assert.NoError(t, err)
				assert.Equal(t, want, m)
			}
		})
	}
	wg.Wait()
}

// CheckContacts checks that m returns the invitee's contact (email) for its booking, and that neither
// the address nor the name appear anywhere in its events: personal data stays out of the log.
func CheckContacts(tb testing.TB, m providers.Mapped, email string) {
	tb.Helper()
	require.Len(tb, m.Contacts, 1)
	require.NotEmpty(tb, m.Events)
	c := m.Contacts[0]
	assert.Equal(tb, m.Events[0].Booking, c.Booking)
	assert.Equal(tb, email, c.Email)
	assert.NotEmpty(tb, c.Name)
	assert.NotContains(tb, fmt.Sprintf("%#v", m.Events), c.Email, "no address in the events")
	assert.NotContains(tb, fmt.Sprintf("%#v", m.Events), c.Name, "no name in the events")
}
