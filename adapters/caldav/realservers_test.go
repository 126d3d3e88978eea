package caldav_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/caldav"
	"bookingledger/adapters/process"
)

// realServer starts a CalDAV server from Debian's packages (radicale, xandikos) on a free port and
// returns the URL template bookingledger would be given. Without the program the test is skipped,
// except under CI=true (scripts/test.sh installs both), where it fails.
func realServer(t *testing.T, name string) (tpl, user, pass string) {
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

// Against real Radicale and Xandikos: a PUT into a collection that does not exist is refused
// (Radicale 409, Xandikos 404) and reported as the missing collection with its URL, nothing done;
// Setup creates it (MKCALENDAR) once; then create, reschedule in place (same href, If-Match) and
// cancel (DELETE, then 404 on a second) behave as the steps expect.
func TestRealServers(t *testing.T) {
	for _, name := range []string{"radicale", "xandikos"} {
		t.Run(name, func(t *testing.T) {
			tpl, user, pass := realServer(t, name)
			tg, err := caldav.New(caldav.Config{URLTemplate: tpl, Username: user, Password: pass, AllowPrivate: true, Timeout: 10 * time.Second})
			require.NoError(t, err)
			ctx := context.Background()
			const resource = "https://api.calendly.com/users/DR-SMITH"
			key := uuid.New()
			href, err := tg.Href(resource, key)
			require.NoError(t, err)
			start := time.Date(2031, 8, 1, 9, 0, 0, 0, time.UTC)
			ev := process.Event{UID: key.String(), Summary: "Booking b", Start: start, End: start.Add(time.Hour)}

			_, err = tg.Create(ctx, href, ev)
			require.ErrorIs(t, err, process.ErrRejected, "a refused PUT wrote nothing")
			require.ErrorIs(t, err, caldav.ErrMissingCollection)
			assert.Contains(t, err.Error(), "calendar collection missing at "+tg.CollectionURL(resource))

			coll, created, err := tg.Setup(ctx, resource)
			require.NoError(t, err)
			assert.True(t, created)
			assert.Equal(t, tg.CollectionURL(resource), coll)
			_, created, err = tg.Setup(ctx, resource)
			require.NoError(t, err)
			assert.False(t, created, "setup twice creates nothing")

			etag, err := tg.Create(ctx, href, ev)
			require.NoError(t, err)
			_, err = tg.Create(ctx, href, ev)
			require.ErrorIs(t, err, process.ErrPrecondition, "If-None-Match: * keeps a second create out")
			got, err := tg.Get(ctx, href)
			require.NoError(t, err)
			assert.Equal(t, key.String(), got.UID)
			assert.True(t, got.Start.Equal(start))
			if etag == "" {
				etag = got.ETag
			}

			moved := ev
			moved.Start, moved.End, moved.Sequence = start.Add(24*time.Hour), start.Add(25*time.Hour), 1
			_, err = tg.Update(ctx, href, "stale-etag", moved)
			require.ErrorIs(t, err, process.ErrPrecondition, "a stale ETag is refused")
			_, err = tg.Update(ctx, href, etag, moved)
			require.NoError(t, err)
			got, err = tg.Get(ctx, href)
			require.NoError(t, err)
			assert.True(t, got.Start.Equal(moved.Start), "rescheduled in place")
			assert.Equal(t, key.String(), got.UID)

			require.NoError(t, tg.Delete(ctx, href))
			require.ErrorIs(t, tg.Delete(ctx, href), process.ErrNotFound)
			_, err = tg.Get(ctx, href)
			require.ErrorIs(t, err, process.ErrNotFound)
		})
	}
}
