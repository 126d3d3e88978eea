package serve

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/httpapi"
	"bookingledger/cmd/bookingledger/internal/servetest"
	"bookingledger/domain/ledger"
)

// muxNotFound is what the server answers when no route matches (the mux's 404 in the JSON error
// body): the admin surface's own 404s (an unknown booking) name what was not found, so this body says
// the route itself is not there.
const muxNotFound = `{"error":"not found","code":"not_found"}` + "\n"

var wildcard = regexp.MustCompile(`\{[^}]*\}`)

// requestFor turns a route pattern ("POST /api/reconciliation/{id}/resolve") into a request line
// that the route matches.
func requestFor(pattern string) (method, path string) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = http.MethodGet, pattern
	}
	return method, wildcard.ReplaceAllString(path, "1")
}

// adminPatterns are the routes serve mounts on the admin listener, enumerated from the same code: the
// prefixes mounted next to /metrics and every route of the admin surface behind them.
func adminPatterns(t *testing.T) []string {
	t.Helper()
	f := newAdminFixture(t, 1<<20)
	srv, err := httpapi.New(httpapi.Config{Ledger: nopLedger{}, Ready: httpapi.CheckFunc(func(context.Context) error { return nil }),
		AdminRoutes: adminRoutes(f.adm)})
	require.NoError(t, err)
	return append(srv.AdminPatterns(), f.routes...)
}

// TestPublicListenerAnswersNoAdminRoute: every route of the admin surface (enumerated, not listed by
// hand) is absent from the public listener and present on the admin one; the public listener serves
// webhooks, /healthz and /readyz, nothing else.
func TestPublicListenerAnswersNoAdminRoute(t *testing.T) {
	t.Parallel() // the slowest tests of the package overlap; each has its own database and ports
	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          servetest.NewDatabaseURL(t),
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		"BOOKINGLEDGER_DRAIN_TIMEOUT":         "5s",
	})
	srv := startServe(t, env)
	require.NotEqual(t, srv.Base, srv.Admin)

	patterns := adminPatterns(t)
	require.Contains(t, patterns, "GET /metrics")
	require.Contains(t, patterns, "GET /api/calendar")
	for _, pattern := range patterns {
		method, path := requestFor(pattern)
		status, body := httpDo(t, "", method, srv.Base+path, "")
		assert.Equal(t, http.StatusNotFound, status, "%s on the public listener", pattern)
		assert.Equal(t, muxNotFound, body, "%s on the public listener", pattern)
		_, body = httpDo(t, "", method, srv.Admin+path, "")
		assert.NotEqual(t, muxNotFound, body, "%s answers on the admin listener", pattern)
	}
	// Whole prefixes too, whatever is mounted under them later.
	for _, path := range []string{"/api/", "/ui/", "/admin/", "/metrics", "/api/calendar", "/debug/pprof/"} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			status, _ := httpDo(t, "", method, srv.Base+path, "")
			assert.Equal(t, http.StatusNotFound, status, "%s %s on the public listener", method, path)
		}
	}
	status, _ := httpDo(t, "", http.MethodGet, srv.Base+"/healthz", "")
	assert.Equal(t, http.StatusOK, status, "/healthz")
	// /readyz is served here, ready or not: its 2 s check can outlast a loaded machine (503 then).
	status, body := httpDo(t, "", http.MethodGet, srv.Base+"/readyz", "")
	assert.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, status, body)
	assert.Contains(t, body, `"status":`, "/readyz answers with its own JSON body")
	for _, path := range []string{"/healthz", "/readyz"} {
		status, _ = httpDo(t, "", http.MethodGet, srv.Admin+path, "")
		assert.Equal(t, http.StatusNotFound, status, "%s is public only", path)
	}
	out := send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "two-listeners")
	assert.Contains(t, out, `"status":"accepted"`)
	status, _ = httpDo(t, "", http.MethodPost, srv.Admin+"/webhooks/calendly", "{}")
	assert.Equal(t, http.StatusNotFound, status, "webhooks are not on the admin listener")
	srv.Stop(t)
	for _, base := range []string{srv.Base, srv.Admin} {
		_, err := http.Get(base + "/")
		assert.Error(t, err, "nothing listens on %s after shutdown", base)
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key, and returns a pool that
// trusts it.
func writeCert(t *testing.T, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bookingledger test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

func TestServeOverTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, roots := writeCert(t, dir)
	srv := startServe(t, envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":   servetest.NewDatabaseURL(t),
		"BOOKINGLEDGER_ADDR":           "127.0.0.1:0",
		"BOOKINGLEDGER_TLS_CERT":       certFile,
		"BOOKINGLEDGER_TLS_KEY":        keyFile,
		"BOOKINGLEDGER_ADMIN_TLS_CERT": certFile,
		"BOOKINGLEDGER_ADMIN_TLS_KEY":  keyFile,
		"BOOKINGLEDGER_DRAIN_TIMEOUT":  "5s",
	}))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
	defer client.CloseIdleConnections()
	for _, u := range []string{srv.Base + "/healthz", srv.Admin + "/metrics"} {
		secure := strings.Replace(u, "http://", "https://", 1)
		resp, err := client.Get(secure)
		require.NoError(t, err, secure)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, secure)
		assert.Equal(t, 2, resp.ProtoMajor, "HTTP/2 is offered over TLS")
		assert.NotNil(t, resp.TLS)

		resp, err = http.Get(u)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to %s is refused", u)
	}
	srv.Stop(t)
}

func TestListenerConfigurationErrors(t *testing.T) {
	const dead = "postgres://bl@127.0.0.1:1/nowhere?connect_timeout=1"
	dir := t.TempDir()
	certFile, keyFile, _ := writeCert(t, dir)
	otherCert, _, _ := writeCert(t, t.TempDir())
	cases := []struct {
		name    string
		env     map[string]string
		message string
	}{
		{name: "certificate without key", env: map[string]string{"BOOKINGLEDGER_TLS_CERT": certFile},
			message: "BOOKINGLEDGER_TLS_CERT and BOOKINGLEDGER_TLS_KEY go together"},
		{name: "admin key without certificate", env: map[string]string{"BOOKINGLEDGER_ADMIN_TLS_KEY": keyFile},
			message: "BOOKINGLEDGER_ADMIN_TLS_CERT and BOOKINGLEDGER_ADMIN_TLS_KEY go together"},
		{name: "missing file", env: map[string]string{"BOOKINGLEDGER_TLS_CERT": filepath.Join(dir, "nope.pem"), "BOOKINGLEDGER_TLS_KEY": keyFile},
			message: "no such file"},
		{name: "key of another certificate", env: map[string]string{"BOOKINGLEDGER_TLS_CERT": otherCert, "BOOKINGLEDGER_TLS_KEY": keyFile},
			message: "private key does not match public key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.env["DATABASE_URL"] = dead
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), []string{"serve"}, envOf(tc.env), &stdout, &stderr)
			assert.Equal(t, 2, exitCode(err, &stderr), "error: %v", err)
			assert.Contains(t, stderr.String(), tc.message)
		})
	}

	// The admin port taken: serve says which variable to change.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	var stderr bytes.Buffer
	err = run(context.Background(), []string{"serve"}, envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL": servetest.NewDatabaseURL(t),
		"BOOKINGLEDGER_ADDR":         "127.0.0.1:0",
		"BOOKINGLEDGER_ADMIN_ADDR":   taken.Addr().String(),
		"BOOKINGLEDGER_MASTER_KEY":   testMasterKey,
	}), io.Discard, &stderr)
	assert.Equal(t, 1, exitCode(err, &stderr))
	assert.Contains(t, stderr.String(), "(BOOKINGLEDGER_ADMIN_ADDR)")
}

// nopLedger records nothing; adminPatterns needs a ledger only to build a server.
type nopLedger struct{}

func (nopLedger) Record(context.Context, ledger.Delivery) (ledger.Result, error) {
	return ledger.Result{}, nil
}
func (nopLedger) Reject(context.Context, ledger.Receipt, string) error { return nil }
