// Package davtest runs real CalDAV servers from Debian's packages (Radicale, Xandikos) for tests, the
// way the suite runs its other services: skipped with a hint when the program is missing, failing
// under CI=true (scripts/test.sh installs both).
package davtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Servers are the programs Start runs.
var Servers = []string{"radicale", "xandikos"}

// Start starts a CalDAV server from Debian's packages (radicale, xandikos) on a free port with an
// empty store and returns the URL template bookingledger would be given, with the user and password
// to use (none for Xandikos). Without the program the test is skipped, except under CI=true
// (scripts/test.sh installs both), where it fails. The server stops when the test ends.
func Start(t *testing.T, name string) (tpl, user, pass string) {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (CI=true: the real-server tests must run); apt-get install %s", name, name)
		}
		t.Skipf("%s not found: real-server test skipped (apt-get install %s, or run `make test` as root)", name, name)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	dir := t.TempDir()
	var cmd *exec.Cmd
	switch name {
	case "radicale":
		user, pass = "host", "pw"
		require.NoError(t, os.WriteFile(filepath.Join(dir, "users"), []byte(user+":"+pass+"\n"), 0o600))
		cfg := fmt.Sprintf("[server]\nhosts = 127.0.0.1:%d\n[auth]\ntype = htpasswd\nhtpasswd_filename = %s\nhtpasswd_encryption = plain\n"+
			"[rights]\ntype = owner_only\n[storage]\nfilesystem_folder = %s\n[logging]\nlevel = warning\n",
			port, filepath.Join(dir, "users"), filepath.Join(dir, "collections"))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config"), []byte(cfg), 0o600))
		cmd = exec.Command(bin, "--config", filepath.Join(dir, "config"))
		tpl = fmt.Sprintf("http://127.0.0.1:%d/%s/{resource}/", port, user)
	case "xandikos":
		cmd = exec.Command(bin, "-d", dir, "-l", "127.0.0.1", "-p", fmt.Sprint(port), "--autocreate")
		tpl = fmt.Sprintf("http://127.0.0.1:%d/user/calendars/{resource}/", port)
	}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		require.True(t, time.Now().Before(deadline), "%s did not listen: %v", name, err)
		time.Sleep(100 * time.Millisecond)
	}
	return tpl, user, pass
}
