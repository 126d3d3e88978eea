package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/pgtest"
)

// errWarnings: systemd-analyze verify exits 0 on an unknown key and only warns.
var errWarnings = errors.New("systemd-analyze printed warnings")

// deployDir holds the example files of docs/operations/deploy.md.
var deployDir = filepath.Join("..", "..", "docs", "operations", "deploy")

// lookTool finds a checker. Without it the check is skipped locally; under CI=true a tool the scripts
// install or the system ships must be there.
func lookTool(t *testing.T, name string, requiredInCI bool) string {
	t.Helper()
	for _, p := range []string{name, "/usr/sbin/" + name, "/sbin/" + name} {
		if found, err := exec.LookPath(p); err == nil {
			return found
		}
	}
	if requiredInCI && os.Getenv("CI") == "true" {
		t.Fatalf("%s not found; scripts/test.sh installs it when run as root", name)
	}
	t.Skipf("%s not installed: the example is not checked here (e.g. apt-get install %s)", name, name)
	return ""
}

func readExample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, name))
	require.NoError(t, err)
	return string(b)
}

// checker runs a tool over a configuration text and returns its output and error.
type checker func(t *testing.T, text string) (string, error)

// assertChecks requires the example to pass and a broken copy to fail: a check that accepts anything
// would otherwise go unnoticed.
func assertChecks(t *testing.T, check checker, example, broken string) {
	t.Helper()
	out, err := check(t, example)
	require.NoError(t, err, out)
	out, err = check(t, broken)
	assert.Error(t, err, "a broken copy must fail the check: %s", out)
}

// TestDeployExamples checks the example configurations of docs/operations/deploy.md with the tools
// that read them.
func TestDeployExamples(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	t.Run("systemd unit", func(t *testing.T) {
		// Where available: not every CI image has systemd.
		analyze := lookTool(t, "systemd-analyze", false)
		bin, err := os.Executable() // any executable: verify checks that ExecStart exists
		require.NoError(t, err)
		unit := readExample(t, "bookingledger.service")
		require.Contains(t, unit, "ExecStart=/usr/local/bin/bookingledger serve")
		check := func(t *testing.T, text string) (string, error) {
			dir := t.TempDir()
			env := filepath.Join(dir, "bookingledger.env")
			require.NoError(t, os.WriteFile(env, []byte(readExample(t, "bookingledger.env")), 0o600))
			text = strings.ReplaceAll(text, "/usr/local/bin/bookingledger", bin)
			text = strings.ReplaceAll(text, "/etc/bookingledger/bookingledger.env", env)
			path := filepath.Join(dir, "bookingledger.service")
			require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
			out, err := exec.Command(analyze, "verify", path).CombinedOutput()
			if err == nil && len(strings.TrimSpace(string(out))) > 0 {
				return string(out), errWarnings // an unknown key is only a warning to systemd
			}
			return string(out), err
		}
		assertChecks(t, check, unit, strings.Replace(unit, "NoNewPrivileges=yes", "NoNewPrivilege=yes", 1))
	})

	t.Run("nginx site", func(t *testing.T) {
		nginx := lookTool(t, "nginx", true)
		site := readExample(t, "nginx.conf")
		check := func(t *testing.T, text string) (string, error) {
			dir := t.TempDir()
			certFile, keyFile, _ := writeCert(t, dir)
			text = strings.ReplaceAll(text, "/etc/letsencrypt/live/bookings.example.com/fullchain.pem", certFile)
			text = strings.ReplaceAll(text, "/etc/letsencrypt/live/bookings.example.com/privkey.pem", keyFile)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "site.conf"), []byte(text), 0o644))
			// The site goes inside http {} of a minimal main configuration whose files are all in dir.
			main := strings.NewReplacer("DIR", dir).Replace(`pid DIR/nginx.pid;
error_log DIR/error.log;
events {}
http {
    access_log off;
    client_body_temp_path DIR/body;
    proxy_temp_path DIR/proxy;
    fastcgi_temp_path DIR/fastcgi;
    uwsgi_temp_path DIR/uwsgi;
    scgi_temp_path DIR/scgi;
    include DIR/site.conf;
}
`)
			conf := filepath.Join(dir, "nginx.conf")
			require.NoError(t, os.WriteFile(conf, []byte(main), 0o644))
			out, err := exec.Command(nginx, "-t", "-q", "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", conf).CombinedOutput()
			return string(out), err
		}
		assertChecks(t, check, site, strings.Replace(site, "proxy_read_timeout 35s;", "proxy_read_timeout;", 1))
	})

	t.Run("Caddyfile", func(t *testing.T) {
		caddy := lookTool(t, "caddy", false)
		caddyfile := readExample(t, "Caddyfile")
		check := func(t *testing.T, text string) (string, error) {
			dir := t.TempDir()
			path := filepath.Join(dir, "Caddyfile")
			require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
			cmd := exec.Command(caddy, "validate", "--adapter", "caddyfile", "--config", path)
			// Caddy keeps its state under XDG_DATA_HOME / HOME: keep it in the test's directory.
			cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		assertChecks(t, check, caddyfile, strings.Replace(caddyfile, "lb_policy round_robin", "lb_policy sometimes", 1))
	})
}

// TestServeAsDatabaseOwnerWithoutSuperuser: the role of docs/operations/deploy.md — it owns its
// database and nothing more — migrates it (btree_gist is a trusted extension), records deliveries and
// runs the projection.
func TestServeAsDatabaseOwnerWithoutSuperuser(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, os.Getenv(pgtest.EnvURL))
	if err != nil {
		pgtest.NewEmptyDatabaseURL(t) // skips (or fails under CI) with the usual hint
		require.NoError(t, err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	role := fmt.Sprintf("bl_owner_%d", rand.Uint32()) // roles are per cluster: unique per run
	_, err = admin.Exec(ctx, `CREATE ROLE `+pgx.Identifier{role}.Sanitize()+` LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE`)
	require.NoError(t, err)
	t.Cleanup(func() { // after the database is dropped (cleanups run last-in first-out)
		_, err := admin.Exec(context.Background(), `DROP ROLE IF EXISTS `+pgx.Identifier{role}.Sanitize())
		assert.NoError(t, err)
	})
	dbURL := pgtest.NewEmptyDatabaseURL(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	dbName := strings.TrimPrefix(u.Path, "/")
	_, err = admin.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{dbName}.Sanitize()+` OWNER TO `+pgx.Identifier{role}.Sanitize())
	require.NoError(t, err)
	superDB := pgtest.Open(t, dbURL)
	_, err = superDB.Exec(ctx, `ALTER SCHEMA public OWNER TO `+pgx.Identifier{role}.Sanitize()) // PostgreSQL 13/14
	require.NoError(t, err)
	u.User = url.User(role)
	ownerURL := u.String()

	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          ownerURL,
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		"BOOKINGLEDGER_DRAIN_TIMEOUT":         "5s",
	})
	srv := startServe(t, env)
	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "owner-1", "--start", "2030-01-07T10:00:00Z")
	waitForCalendar(t, srv.AdminToken(t), srv.Admin, "2030-01-07T00:00:00Z", "2030-01-08T00:00:00Z", map[string]string{"calendly-owner-1": "active"})
	srv.Stop(t)

	var super bool
	var owner string
	require.NoError(t, superDB.QueryRow(ctx, `SELECT r.rolsuper, pg_get_userbyid(c.relowner) FROM pg_class c, pg_roles r
WHERE c.relname = 'events' AND r.rolname = $1`, role).Scan(&super, &owner))
	assert.False(t, super)
	assert.Equal(t, role, owner, "serve created the schema as the owner role")
}
