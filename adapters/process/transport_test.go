package process_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/process"
)

// A request that never left (refused connection, unknown name) proves nothing was done; one that
// reached a server that never answered may have been acted on.
func TestTransportErrorTellsNotSentFromUnknown(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + l.Addr().String() + "/"
	require.NoError(t, l.Close())
	_, err = http.Get(closed)
	require.Error(t, err)
	assert.ErrorIs(t, process.TransportError("PUT", err), process.ErrNothingDone, "refused: %v", err)

	_, err = http.Get("http://no-such-host.invalid/")
	require.Error(t, err)
	assert.ErrorIs(t, process.TransportError("PUT", err), process.ErrNothingDone, "DNS: %v", err)

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL, nil)
	_, err = http.DefaultClient.Do(req)
	require.Error(t, err)
	got := process.TransportError("PUT", err)
	assert.False(t, errors.Is(got, process.ErrNothingDone), "a request the server took and never answered is unknown: %v", got)
	assert.Nil(t, process.TransportError("PUT", nil))
}
