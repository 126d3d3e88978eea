package serve

// Helpers of this package's tests that start serve in-process, as cmd/bookingledger's end-to-end
// tests do through run (the same helpers, with run's dispatch of the commands they call).

import (
	"bookingledger/cmd/bookingledger/internal/servetest"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"bookingledger/adapters/privacy"
	"bookingledger/cmd/bookingledger/internal/admincmd"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/sendcmd"
)

// run dispatches the commands these tests run as the binary's run does.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	switch args[0] {
	case "serve":
		return RunServe(ctx, args[1:], getenv, stdout, stderr)
	case "migrate":
		return RunMigrate(ctx, args[1:], getenv, stdout, stderr)
	case "token":
		return admincmd.RunToken(ctx, args[1:], getenv, stdout, stderr)
	case "send":
		return sendcmd.Run(ctx, args[1:], getenv, stdout, stderr)
	}
	return fmt.Errorf("the serve tests do not run %q", args[0])
}

var exitCode = cmdline.ExitCode

// The helpers shared with the serve package's tests (internal/servetest).
type (
	addrWriter   = servetest.AddrWriter
	lockedBuffer = servetest.LockedBuffer
)

func newAddrWriter() *addrWriter { return servetest.NewAddrWriter() }

var envOf = servetest.EnvOf

const demoCalendlyKey = "run-test-calendly-key"

// testMasterKey is the BOOKINGLEDGER_MASTER_KEY of the serve processes tests start (serve refuses to
// run without one).
const testMasterKey = "test:dGVzdC1tYXN0ZXIta2V5LTMyLWJ5dGVzLWxvbmchISE="

// servedProcess is a `bookingledger serve` started through run on an ephemeral port.
type servedProcess struct {
	base  string // the public listener: webhooks, /healthz, /readyz
	admin string // the admin listener: /api/, /metrics
	// token is an admin token created for the test, tokenName its name.
	token, tokenName string
	stderr           *lockedBuffer
	cancel           context.CancelFunc
	done             chan error
}

func startServe(t *testing.T, env func(string) string) *servedProcess {
	t.Helper()
	env = withEphemeralAdmin(env)
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := newAddrWriter(), &lockedBuffer{}
	p := &servedProcess{stderr: stderr, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- RunServe(ctx, nil, env, stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
		}
	})
	select {
	case addr := <-stdout.Addr:
		p.base = "http://" + addr
		p.admin = "http://" + stdout.AdminAddr()
		// serve migrated before it listened: the token table is there. (On a schema a newer release
		// migrated, which serve may be allowed to run on, the token command refuses: no token then.)
		if env(EnvAllowNewer) != "true" {
			p.tokenName = fmt.Sprintf("test-admin-%d", time.Now().UnixNano())
			out, errOut, code := cli(t, env, "token", "create", "--name", p.tokenName, "--scope", "admin")
			require.Equal(t, 0, code, errOut)
			p.token = strings.TrimSpace(out)
		}
	case err := <-p.done:
		t.Fatalf("serve exited early: %v\n%s", err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not print its address\n%s", stderr.String())
	}
	return p
}

// withEphemeralAdmin gives serve an ephemeral admin port unless the test chose one, so that serves in
// parallel tests (and a developer's make run) never compete for the default one.
func withEphemeralAdmin(env func(string) string) func(string) string {
	return func(k string) string {
		v := env(k)
		switch {
		case v != "":
			return v
		case k == EnvAdminAddr:
			return "127.0.0.1:0"
		case k == privacy.EnvMasterKey:
			return testMasterKey // serve refuses to start without one
		}
		return v
	}
}

// stop interrupts serve as SIGINT would and requires a clean exit.
func (p *servedProcess) stop(t *testing.T) {
	t.Helper()
	p.cancel()
	select {
	case err := <-p.done:
		p.done <- err // for Cleanup
		require.NoError(t, err, p.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not shut down\n%s", p.stderr.String())
	}
}

// cli runs one command through run, as the binary would, and returns its exit code too.
func cli(t *testing.T, env func(string) string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, env, &out, &errOut)
	code = exitCode(err, &errOut)
	return out.String(), errOut.String(), code
}

// send posts a delivery with the send subcommand's code path and requires a 2xx.
func send(t *testing.T, env func(string) string, base string, args ...string) string {
	t.Helper()
	out, errOut, code := cli(t, env, append(append([]string{"send"}, args...), "--url", base)...)
	require.Equal(t, 0, code, "send %v: %s%s", args, out, errOut)
	return out
}

// httpDo sends a request with tok as its bearer token (none when empty).
func httpDo(t *testing.T, tok, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}
