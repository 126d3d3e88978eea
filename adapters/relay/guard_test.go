package relay_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/relay"
)

// localResolver answers every name from a DNS server in the test, so rebinding is testable without
// the network.
func localResolver(t *testing.T, answer func() string) *net.Resolver {
	t.Helper()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dnsConn(answer), nil
	}}
}

func TestPrivateTargetsAreRefusedWhenAdded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	public := "93.184.215.14"
	r := e.startRelay(t, relayOpts{guard: relay.Guard{Resolver: localResolver(t, func() string { return "10.1.2.3" })}})
	ctx := context.Background()
	for _, u := range []string{"http://127.0.0.1:8080/x", "http://10.0.0.8/x", "https://192.168.1.1/", "http://[::1]/",
		"http://169.254.169.254/latest/meta-data", "http://100.64.0.1/", "http://0.0.0.0/", "http://[fd00::1]/",
		"http://[::ffff:127.0.0.1]/", "http://internal.example/"} {
		_, _, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: u})
		assert.ErrorIs(t, err, relay.ErrPrivateTarget, u)
	}
	for _, u := range []string{"ftp://example.com/", "http://user:pw@" + public + "/", "/relative", "http://" + public + "/#frag", ""} {
		_, _, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: u})
		assert.ErrorIs(t, err, relay.ErrInvalidURL, u)
	}
	_, _, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: "https://" + public + "/hook"})
	assert.NoError(t, err, "a public address is accepted")
	eps, err := r.Endpoints(ctx)
	require.NoError(t, err)
	assert.Len(t, eps, 1)

	allowing := e.startRelay(t, relayOpts{guard: relay.Guard{AllowPrivate: true}})
	_, _, err = allowing.AddEndpoint(ctx, relay.NewEndpoint{URL: "http://127.0.0.1:9/x"})
	assert.NoError(t, err, "BOOKINGLEDGER_RELAY_ALLOW_PRIVATE lets loopback through")
}

// A name that resolved to a public address when it was added and resolves to loopback now (DNS
// rebinding) is refused when dialing: the receiver on loopback never sees a request.
func TestPrivateTargetsAreRefusedWhenDialed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	var answer atomic.Value
	answer.Store("93.184.215.14")
	r := e.startRelay(t, relayOpts{guard: relay.Guard{Resolver: localResolver(t, func() string { return answer.Load().(string) })}})
	ctx := context.Background()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	ep, _, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: "http://rebind.example:" + port + "/hook"})
	require.NoError(t, err)
	answer.Store("127.0.0.1") // the name is rebound to where the receiver listens
	e.record(t, "rebind", e.scheduled("calendly-rebind", 9))
	eventually(t, 30*time.Second, "a refused attempt", func() bool {
		ds := deliveriesIn(t, r, ep.ID, "")
		return len(ds) == 1 && ds[0].Attempts >= 1
	})
	d := deliveriesIn(t, r, ep.ID, "")[0]
	assert.Contains(t, d.LastError, "target address not allowed", "egress's dialer refused it")
	assert.Zero(t, d.LastStatus)
	assert.Zero(t, hits.Load(), "nothing reached the loopback receiver")
}

// A redirect is the answer, not an instruction: the relay records the 3xx as a failure and never
// calls where it points.
func TestRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var hits atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	t.Cleanup(target.Close)
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	r := e.startRelay(t, relayOpts{schedule: []time.Duration{0}})
	ctx := context.Background()
	ep, _, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: redirect.URL})
	require.NoError(t, err)
	e.record(t, "redir", e.scheduled("calendly-redir", 9))
	eventually(t, 30*time.Second, "the delivery to be dead", func() bool {
		return len(deliveriesIn(t, r, ep.ID, relay.StateDead)) == 1
	})
	assert.Equal(t, http.StatusTemporaryRedirect, deliveriesIn(t, r, ep.ID, relay.StateDead)[0].LastStatus)
	assert.Zero(t, hits.Load())
}

func TestTypeFiltersAreValidatedAndMatched(t *testing.T) {
	t.Parallel()
	ps, err := relay.ParseTypes("booking.scheduled.*, booking.payment_* ,")
	require.NoError(t, err)
	assert.Equal(t, []string{"booking.scheduled.*", "booking.payment_*"}, ps)
	assert.True(t, relay.MatchTypes(ps, "booking.payment_refunded.v1"))
	assert.True(t, relay.MatchTypes(ps, "booking.scheduled.v1"))
	assert.False(t, relay.MatchTypes(ps, "booking.canceled.v1"))
	assert.True(t, relay.MatchTypes(nil, "anything"))
	for _, bad := range []string{"Booking.*", "booking/x", "a[b]", `a\b`} {
		_, err := relay.ParseTypes(bad)
		assert.ErrorIs(t, err, relay.ErrInvalidTypes, bad)
	}
}

// A name must resolve only to allowed addresses: one private address among public ones is refused,
// whichever comes first; a name resolving to public addresses only is accepted.
func TestANameWithOnePrivateAddressIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var answer atomic.Value
	r := e.startRelay(t, relayOpts{guard: relay.Guard{Resolver: localResolver(t, func() string { return answer.Load().(string) })}})
	ctx := context.Background()
	for _, addrs := range []string{"93.184.215.14,10.1.2.3", "10.1.2.3,93.184.215.14", "93.184.215.14,8.8.8.8,127.0.0.1"} {
		answer.Store(addrs)
		_, _, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: "https://mixed.example/hook"})
		assert.ErrorIs(t, err, relay.ErrPrivateTarget, addrs)
	}
	answer.Store("93.184.215.14,8.8.8.8")
	_, _, err := r.AddEndpoint(ctx, relay.NewEndpoint{URL: "https://public.example/hook"})
	assert.NoError(t, err)
}

// An endpoint URL has at most 2048 bytes.
func TestEndpointURLsHaveAtMost2048Bytes(t *testing.T) {
	t.Parallel()
	base := "https://example.com/"
	_, err := relay.ParseURL(base + strings.Repeat("a", 2048-len(base)))
	assert.NoError(t, err)
	_, err = relay.ParseURL(base + strings.Repeat("a", 2049-len(base)))
	assert.ErrorIs(t, err, relay.ErrInvalidURL)
}
