package acuity_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/acuity"
	"bookingledger/adapters/providers/acuity/acuitytest"
	"bookingledger/adapters/providers/providertest"
)

func signed(key, action string) (http.Header, []byte) {
	body := formBody(action, apptID)
	return sigHeader(acuity.Sign(key, body)), body
}

// requireDeferred checks the contract of a failed fetch: ErrDeferred, never ErrUnmappable, and the
// delivery ID still named so that the deferred receipt can be found with the later ones.
func requireDeferred(t *testing.T, m providers.Mapped, err error) {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, providers.ErrDeferred)
	assert.NotErrorIs(t, err, providers.ErrUnmappable)
	assert.Equal(t, "acuity:rescheduled:"+apptID, m.DeliveryID)
	assert.Empty(t, m.Events, "never mapped without data")
}

func TestMapFetchesWithTheKeyThatVerified(t *testing.T) {
	api := acuitytest.New(t, userID, keyB) // Acuity knows only the older key
	api.Put(appt(baseState()))
	p := newProvider(t, api, keyA, keyB)

	h, body := signed(keyB, "rescheduled")
	m, err := p.Map(context.Background(), h, body, time.Now())
	require.NoError(t, err)
	assert.Len(t, m.Events, 2)

	h, body = signed(keyA, "rescheduled")
	m, err = p.Map(context.Background(), h, body, time.Now())
	requireDeferred(t, m, err)
	assert.Contains(t, err.Error(), "HTTP 401")
	assert.NotContains(t, err.Error(), keyA, "errors never carry a key")
}

func TestMapRetriesWhatCanHealWithinTheRequest(t *testing.T) {
	for _, status := range []int{http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusBadGateway} {
		api := acuitytest.New(t, userID, keyA)
		api.Put(appt(baseState()))
		api.FailNext(2, status)
		h, body := signed(keyA, "rescheduled")
		m, err := newProvider(t, api, keyA).Map(context.Background(), h, body, time.Now())
		require.NoError(t, err, "status %d", status)
		assert.Len(t, m.Events, 2)
		assert.Len(t, api.Requests(), 3, "two failures, then the answer")
	}
}

func TestMapGivesUpAfterItsAttempts(t *testing.T) {
	api := acuitytest.New(t, userID, keyA)
	api.FailAll(http.StatusServiceUnavailable)
	h, body := signed(keyA, "rescheduled")
	m, err := newProvider(t, api, keyA).Map(context.Background(), h, body, time.Now())
	requireDeferred(t, m, err)
	assert.ErrorIs(t, err, acuity.ErrFetch)
	assert.Len(t, api.Requests(), 3)
	assert.Contains(t, err.Error(), "after 3 attempt(s)")
}

func TestMapDoesNotRetryWhatCannotHealSoon(t *testing.T) {
	for name, setup := range map[string]func(api *acuitytest.Server){
		"unknown appointment (404)": func(*acuitytest.Server) {},
		"bad credentials (401)":     nil,
		"not JSON":                  func(api *acuitytest.Server) { api.PutRaw(apptID, []byte("<html>maintenance</html>")) },
		"another appointment":       func(api *acuitytest.Server) { api.PutRaw(apptID, providertest.ReadFile(t, "appointment_class.json")) },
	} {
		t.Run(name, func(t *testing.T) {
			var api *acuitytest.Server
			if setup == nil {
				api = acuitytest.New(t, "someone-else", keyA)
				api.Put(appt(baseState()))
			} else {
				api = acuitytest.New(t, userID, keyA)
				setup(api)
			}
			h, body := signed(keyA, "rescheduled")
			m, err := newProvider(t, api, keyA).Map(context.Background(), h, body, time.Now())
			requireDeferred(t, m, err)
			assert.Len(t, api.Requests(), 1)
		})
	}
}

func TestMapStaysWithinItsBudgetWhenTheAPIHangs(t *testing.T) {
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	p, err := acuity.New(acuity.Config{Keys: providers.NewSecrets(keyA), UserID: userID, APIURL: slow.URL,
		Attempts: 5, AttemptTimeout: 150 * time.Millisecond, Budget: 400 * time.Millisecond, Backoff: 10 * time.Millisecond})
	require.NoError(t, err)
	h, body := signed(keyA, "rescheduled")
	start := time.Now()
	m, err := p.Map(context.Background(), h, body, time.Now())
	requireDeferred(t, m, err)
	assert.Less(t, time.Since(start), 2*time.Second, "the budget bounds the whole fetch")
}

func TestMapOfACanceledRequestIsNotUnmappable(t *testing.T) {
	api := acuitytest.New(t, userID, keyA)
	api.Put(appt(baseState()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h, body := signed(keyA, "rescheduled")
	m, err := newProvider(t, api, keyA).Map(ctx, h, body, time.Now())
	requireDeferred(t, m, err)
}

func TestMapWithoutVerificationIsATransientError(t *testing.T) {
	api := acuitytest.New(t, userID, keyA)
	api.Put(appt(baseState()))
	_, body := signed(keyA, "rescheduled")
	_, err := newProvider(t, api, keyA).Map(context.Background(), http.Header{}, body, time.Now())
	require.Error(t, err)
	assert.NotErrorIs(t, err, providers.ErrUnmappable)
	assert.NotErrorIs(t, err, providers.ErrDeferred)
	assert.Empty(t, api.Requests(), "nothing is fetched for an unverified body")
}

func TestMapOfAnIgnoredActionFetchesNothing(t *testing.T) {
	api := acuitytest.New(t, userID, keyA)
	body := []byte("action=order.completed&id=86512347")
	m, err := newProvider(t, api, keyA).Map(context.Background(), sigHeader(acuity.Sign(keyA, body)), body, time.Now())
	require.NoError(t, err)
	assert.Empty(t, m.Events)
	assert.Equal(t, "acuity action order.completed not mapped", m.Reason)
	assert.Empty(t, api.Requests())
}

func TestRefetch(t *testing.T) {
	api := acuitytest.New(t, userID, keyA) // keyA: the key that verified; keyB is newer
	api.Put(appt(baseState()))
	p := newProvider(t, api, keyB, keyA)
	_, body := signed(keyA, "rescheduled")
	later := time.Date(2025, 6, 3, 12, 0, 0, 0, time.UTC)

	m, err := p.Refetch(context.Background(), body, 1, later)
	require.NoError(t, err)
	require.Len(t, m.Events, 2)
	assert.Equal(t, later, m.Events[0].OccurredAt, "the observation is the refetch's time")

	m, err = p.Refetch(context.Background(), body, 2, later)
	requireDeferred(t, m, err)
	assert.Contains(t, err.Error(), "HTTP 401", "an index past the list (a key rotated out) falls back to the newest, which Acuity refuses here")

	n := len(api.Requests())
	api.FailNext(1, http.StatusServiceUnavailable)
	m, err = p.Refetch(context.Background(), body, 1, later)
	requireDeferred(t, m, err)
	assert.Len(t, api.Requests(), n+1, "one attempt: the job queue owns the retries")

	_, err = p.Refetch(context.Background(), []byte("garbage"), 1, later)
	assert.ErrorIs(t, err, providers.ErrUnmappable)

	none, err := acuity.New(acuity.Config{APIURL: api.URL})
	require.NoError(t, err)
	m, err = none.Refetch(context.Background(), body, 1, later)
	requireDeferred(t, m, err)
}

// A replay of a body fetched moments ago reuses that fetch (at its observation time); a different
// body, a later replay past the window and a copy after a failed fetch each fetch again.
func TestReplayReusesARecentFetch(t *testing.T) {
	api := acuitytest.New(t, userID, keyA)
	api.Put(appt(baseState()))
	p := newProvider(t, api, keyA)
	h, body := signed(keyA, "rescheduled")
	t0 := time.Date(2025, 6, 3, 12, 0, 0, 0, time.UTC)

	first, err := p.Map(context.Background(), h, body, t0)
	require.NoError(t, err)
	replay, err := p.Map(context.Background(), h, body, t0.Add(2*time.Second))
	require.NoError(t, err)
	assert.Len(t, api.Requests(), 1, "the replay reused the fetch")
	assert.Equal(t, first.Events, replay.Events, "observed when the reused fetch was made")

	hc, changed := signed(keyA, "changed")
	_, err = p.Map(context.Background(), hc, changed, t0.Add(3*time.Second))
	require.NoError(t, err)
	assert.Len(t, api.Requests(), 2, "another body fetches")

	_, err = p.Map(context.Background(), h, body, t0.Add(acuity.DefaultReuseWindow+time.Second))
	require.NoError(t, err)
	assert.Len(t, api.Requests(), 3, "past the window it fetches again")

	api.FailAll(http.StatusServiceUnavailable)
	m, err := p.Map(context.Background(), h, body, t0.Add(time.Minute))
	requireDeferred(t, m, err)
	n := len(api.Requests())
	api.Recover()
	_, err = p.Map(context.Background(), h, body, t0.Add(time.Minute))
	require.NoError(t, err)
	assert.Len(t, api.Requests(), n+1, "a failed fetch is never reused")
}

// The reuse window is half-open: a replay received exactly DefaultReuseWindow after the fetch fetches
// again, one just before it does not.
func TestReplayReuseWindowEdge(t *testing.T) {
	api := acuitytest.New(t, userID, keyA)
	api.Put(appt(baseState()))
	p := newProvider(t, api, keyA)
	h, body := signed(keyA, "rescheduled")
	t0 := time.Date(2025, 6, 3, 12, 0, 0, 0, time.UTC)

	_, err := p.Map(context.Background(), h, body, t0)
	require.NoError(t, err)
	_, err = p.Map(context.Background(), h, body, t0.Add(acuity.DefaultReuseWindow-time.Nanosecond))
	require.NoError(t, err)
	assert.Len(t, api.Requests(), 1, "within the window: reused")
	_, err = p.Map(context.Background(), h, body, t0.Add(acuity.DefaultReuseWindow))
	require.NoError(t, err)
	assert.Len(t, api.Requests(), 2, "at the window's end: fetched again")
}
