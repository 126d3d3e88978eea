package serve

// Helpers of this package's tests that start serve in-process, as cmd/bookingledger's end-to-end
// tests do through run (the same helpers, with run's dispatch of the commands they call).

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"bookingledger/cmd/bookingledger/internal/admincmd"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/sendcmd"
	"bookingledger/cmd/bookingledger/internal/servetest"
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

const testMasterKey = servetest.MasterKey

// The serve helpers shared with cmd/bookingledger's tests (internal/servetest), over run.
type servedProcess = servetest.Served

var (
	commands           = servetest.Commands{Run: run, ExitCode: exitCode}
	withEphemeralAdmin = servetest.WithEphemeralAdmin
	httpDo             = servetest.HTTPDo // a request with a bearer token (none when empty)
)

// startServe runs serve until the test ends (or stop) and returns it once it listens, with an admin
// token.
func startServe(t *testing.T, env func(string) string) *servedProcess { return commands.Start(t, env) }

// cli runs one command through run, as the binary would, and returns its exit code too.
func cli(t *testing.T, env func(string) string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return commands.CLI(t, env, args...)
}

// send posts a delivery with the send subcommand's code path and requires a 2xx.
func send(t *testing.T, env func(string) string, base string, args ...string) string {
	t.Helper()
	return commands.Send(t, env, base, args...)
}

// servetest names serve's variables without importing serve.
func TestServetestNamesServesVariables(t *testing.T) {
	require.Equal(t, EnvAdminAddr, servetest.EnvAdminAddr)
	require.Equal(t, EnvAllowNewer, servetest.EnvAllowNewer)
}
