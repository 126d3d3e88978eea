package egress_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/egress"
)

func TestLoopbackIsRefusedUnlessAllowed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	_, err := egress.HTTPClient(false, time.Second).Get(srv.URL)
	require.Error(t, err)
	assert.True(t, errors.Is(err, egress.ErrForbiddenAddress), "got %v", err)
	_, err = egress.Dialer(false, time.Second).DialContext(context.Background(), "tcp", srv.Listener.Addr().String())
	assert.ErrorIs(t, err, egress.ErrForbiddenAddress)

	resp, err := egress.HTTPClient(true, time.Second).Get(srv.URL + "/moved")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusFound, resp.StatusCode, "redirects are not followed")
}

func TestPublic(t *testing.T) {
	for addr, want := range map[string]bool{"8.8.8.8": true, "10.1.2.3": false, "192.168.0.1": false, "127.0.0.1": false,
		"169.254.169.254": false, "::1": false, "fd00::1": false, "2001:4860:4860::8888": true, "0.0.0.0": false,
		"100.64.0.1": false, "100.127.255.254": false, "0.1.2.3": false, "::ffff:127.0.0.1": false, "::ffff:8.8.8.8": true,
		// Not unicast, or not global: multicast, broadcast, unspecified, IPv6 link-local.
		"224.0.0.1": false, "239.255.255.250": false, "255.255.255.255": false, "ff02::1": false, "::": false, "fe80::1": false} {
		assert.Equal(t, want, egress.Public(netip.MustParseAddr(addr)), addr)
	}
}

// A client gives up after its timeout: a target that never answers is an error, not a wait.
func TestTheClientGivesUpAfterItsTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second): // a client without a timeout gets its answer now
		}
	}))
	defer srv.Close()
	start := time.Now()
	_, err := egress.HTTPClient(true, 200*time.Millisecond).Get(srv.URL)
	require.Error(t, err)
	assert.Less(t, time.Since(start), 4*time.Second)
}
