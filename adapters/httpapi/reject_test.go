package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/httpapi"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/calendly"
	"bookingledger/domain/ledger"
)

// rawExchange writes request on a fresh TCP connection to addr, half-closes it when asked, and reads
// one response.
func rawExchange(t *testing.T, addr, request string, halfClose bool) (*http.Response, map[string]string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(20*time.Second)))
	_, err = io.WriteString(c, request)
	require.NoError(t, err)
	if halfClose {
		require.NoError(t, c.(*net.TCPConn).CloseWrite())
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err, "the client can read an answer")
	defer resp.Body.Close()
	var body map[string]string
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &body), "a JSON error body: %q", raw)
	return resp, body
}

// A body shorter than its Content-Length, the client half-closing: 400, and its rejected receipt is
// written although the request's own context is already canceled.
func TestUnreadableBodyGetsItsReceipt(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	addr := strings.TrimPrefix(ts.URL, "http://")
	resp, body := rawExchange(t, addr, "POST /webhooks/calendly HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Content-Length: 100\r\n\r\n{\"event\":", true)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, "body_unreadable", body["code"])
	require.Eventually(t, func() bool {
		return ts.count(t, `SELECT count(*) FROM receipts WHERE provider = 'calendly' AND outcome = 'rejected'
    AND reason LIKE 'body_unreadable:%' AND body IS NULL`) == 1
	}, 5*time.Second, 20*time.Millisecond, "the rejected receipt is written\n%s", ts.Logs.String())
	assert.NotContains(t, ts.Logs.String(), "rejected receipt not written")
}

// serveFor runs Serve on a loopback listener until the test ends.
func serveFor(t *testing.T, cfg httpapi.Config) string {
	t.Helper()
	srv, err := httpapi.New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, httpapi.Endpoint{Name: "public", Listener: ln}) }()
	t.Cleanup(func() {
		cancel()
		<-served
	})
	return ln.Addr().String()
}

// A trickled body cut off at the read timeout is answered 408 in the JSON error body, and receipted.
// Requests net/http refuses before any handler runs (a Content-Length that is not a number) get the
// JSON error body too.
func TestServeAnswersCutOffAndUnparsableRequestsInJSON(t *testing.T) {
	parallel(t)
	pool := spares.Database(t)
	logs := &syncBuffer{}
	addr := serveFor(t, httpapi.Config{
		Ledger:                  ledger.NewService(postgres.NewStore(pool), eventcodec.JSON{}),
		Providers:               []providers.Provider{calendly.New(providers.NewSecrets(calendlyKey), 0)},
		Ready:                   httpapi.CheckFunc(func(context.Context) error { return nil }),
		Logger:                  slog.New(slog.NewJSONHandler(logs, nil)),
		RejectReceiptsPerMinute: 10,
		ReadTimeout:             300 * time.Millisecond,
	})

	resp, body := rawExchange(t, addr, "POST /webhooks/calendly HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"ev", false)
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	assert.Equal(t, "body_timeout", body["code"])
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM receipts
WHERE outcome = 'rejected' AND reason LIKE 'body_timeout:%'`).Scan(&n))
	assert.Equal(t, 1, n, "the cut-off request is receipted\n%s", logs.String())

	resp, body = rawExchange(t, addr, "POST /webhooks/calendly HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", false)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Equal(t, "bad_request", body["code"])
	assert.Contains(t, body["error"], "could not be parsed")
}

// Methods and paths the routes do not serve get the JSON error body, not the mux's plain text.
func TestUnservedMethodsAndPathsAnswerInJSON(t *testing.T) {
	parallel(t)
	ts := newServer(t)
	for _, tc := range []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{http.MethodPut, "/webhooks/calendly", http.StatusMethodNotAllowed, "method_not_allowed", "POST"},
		{http.MethodGet, "/webhooks/calendly", http.StatusMethodNotAllowed, "method_not_allowed", "POST"},
		{http.MethodPost, "/healthz", http.StatusMethodNotAllowed, "method_not_allowed", "GET, HEAD"},
		{http.MethodGet, "/nowhere", http.StatusNotFound, "not_found", ""},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, ts.URL+tc.path, strings.NewReader("{}"))
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			assert.Equal(t, tc.allow, resp.Header.Get("Allow"))
			var body map[string]string
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			assert.Equal(t, tc.code, body["code"])
		})
	}
}
