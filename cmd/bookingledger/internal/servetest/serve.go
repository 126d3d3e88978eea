package servetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"bookingledger/adapters/privacy"
)

// The variables of serve that Start sets or reads, by name: this package cannot import serve, whose
// tests import it (serve's TestServetestNamesServesVariables checks the names).
const (
	EnvAdminAddr  = "BOOKINGLEDGER_ADMIN_ADDR"
	EnvAllowNewer = "BOOKINGLEDGER_ALLOW_NEWER_SCHEMA"
)

// MasterKey is the BOOKINGLEDGER_MASTER_KEY of the serve processes tests start (serve refuses to run
// without one).
const MasterKey = "test:dGVzdC1tYXN0ZXIta2V5LTMyLWJ5dGVzLWxvbmchISE="

// Commands runs the commands of a test package: the binary's run in cmd/bookingledger, a dispatch of
// the few it needs in serve's tests. Run gets the command's name first, as the binary's arguments do.
type Commands struct {
	Run      func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error
	ExitCode func(err error, stderr io.Writer) int
}

// Served is a `bookingledger serve` started through Run on an ephemeral port.
type Served struct {
	Base   string // the public listener: webhooks, /healthz, /readyz
	Admin  string // the admin listener: /api/, /metrics
	Stderr *LockedBuffer
	cancel context.CancelFunc
	done   chan error

	// The admin token, created by the first AdminToken: most tests never call the admin API, and the
	// token command is a process's worth of work (a pool, the schema checks, a connection).
	commands  Commands
	env       func(string) string
	tokenOnce sync.Once
	token     string
	tokenName string
}

// AdminToken returns an admin token created for the test (on the first call); empty on a schema a
// newer release migrated, which serve may be allowed to run on but the token command refuses.
func (p *Served) AdminToken(t *testing.T) string {
	t.Helper()
	p.tokenOnce.Do(func() {
		if p.env(EnvAllowNewer) == "true" {
			return
		}
		name := fmt.Sprintf("test-admin-%d", time.Now().UnixNano())
		out, errOut, code := p.commands.CLI(t, p.env, "token", "create", "--name", name, "--scope", "admin")
		require.Equal(t, 0, code, errOut)
		p.token, p.tokenName = strings.TrimSpace(out), name
	})
	return p.token
}

// AdminTokenName is the name of AdminToken's token (creating it if no test asked for it yet).
func (p *Served) AdminTokenName(t *testing.T) string {
	t.Helper()
	p.AdminToken(t)
	return p.tokenName
}

// Start runs serve with env until the test ends (or Stop), and returns it once it listens; its admin
// token is AdminToken's.
func (c Commands) Start(t *testing.T, env func(string) string) *Served {
	t.Helper()
	env = WithEphemeralAdmin(env)
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := NewAddrWriter(), &LockedBuffer{}
	p := &Served{Stderr: stderr, cancel: cancel, done: make(chan error, 1), commands: c, env: env}
	go func() { p.done <- c.Run(ctx, []string{"serve"}, env, stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
		}
	})
	select {
	case addr := <-stdout.Addr:
		p.Base = "http://" + addr
		p.Admin = "http://" + stdout.AdminAddr()
	case err := <-p.done:
		t.Fatalf("serve exited early: %v\n%s", err, stderr.String())
	case <-time.After(startBound):
		t.Fatalf("serve did not print its address within %s\n%s", startBound, stderr.String())
	}
	return p
}

// startBound is how long Start waits for serve's address: serve migrates an empty database before it
// listens, which took over 30 s beside the package's other tests on two loaded cores. A bound, not a
// wait: a serve that listens sooner is used at once.
const startBound = 2 * time.Minute

// WithEphemeralAdmin gives serve an ephemeral admin port unless the test chose one, so that serves in
// parallel tests (and a developer's make run) never compete for the default one, and a master key.
func WithEphemeralAdmin(env func(string) string) func(string) string {
	return func(k string) string {
		v := env(k)
		switch {
		case v != "":
			return v
		case k == EnvAdminAddr:
			return "127.0.0.1:0"
		case k == privacy.EnvMasterKey:
			return MasterKey // serve refuses to start without one
		}
		return v
	}
}

// Stop interrupts serve as SIGINT would and requires a clean exit.
func (p *Served) Stop(t *testing.T) {
	t.Helper()
	p.cancel()
	select {
	case err := <-p.done:
		p.done <- err // for Cleanup
		require.NoError(t, err, p.Stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not shut down\n%s", p.Stderr.String())
	}
}

// CLI runs one command through Run, as the binary would, and returns its exit code too.
func (c Commands) CLI(t *testing.T, env func(string) string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := c.Run(context.Background(), args, env, &out, &errOut)
	code = c.ExitCode(err, &errOut)
	return out.String(), errOut.String(), code
}

// Send posts a delivery with the send subcommand's code path and requires a 2xx.
func (c Commands) Send(t *testing.T, env func(string) string, base string, args ...string) string {
	t.Helper()
	out, errOut, code := c.CLI(t, env, append(append([]string{"send"}, args...), "--url", base)...)
	require.Equal(t, 0, code, "send %v: %s%s", args, out, errOut)
	return out
}

// HTTPDo sends a request with tok as its bearer token (none when empty).
func HTTPDo(t *testing.T, tok, method, url, body string) (int, string) {
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
