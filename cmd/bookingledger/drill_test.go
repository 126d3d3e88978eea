package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/pgtest"
)

// pgBin finds a PostgreSQL client program (pg_dump, pg_restore) where scripts/pg.sh finds the server.
func pgBin(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if p := filepath.Join(d, name); isExecutable(p) {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found (CI=true: the restore drill must run); install PostgreSQL's client programs", name)
	}
	t.Skipf("%s not found: install PostgreSQL (e.g. apt-get install postgresql) to run the restore drill", name)
	return ""
}

func versionOf(bindir string) int {
	var v int
	fmt.Sscanf(filepath.Base(filepath.Dir(bindir)), "%d", &v)
	return v
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&0o111 != 0
}

// newCluster starts a PostgreSQL cluster of its own with scripts/pg.sh and returns its directory and
// URL; it is stopped and deleted when the test ends.
func newCluster(t *testing.T) (dir, url string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "bl-drill-") // not t.TempDir: its parent is private to this user, and the cluster may run as postgres
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = exec.Command(pgScript, "stop", dir).Run()
		_ = os.RemoveAll(dir)
	})
	return dir, pgStart(t, "start", dir, "--fast")
}

var pgScript = filepath.Join("..", "..", "scripts", "pg.sh")

// pgStart runs a scripts/pg.sh command that prints the cluster's URL, and returns it.
func pgStart(t *testing.T, args ...string) string {
	t.Helper()
	var stderr strings.Builder
	cmd := exec.Command(pgScript, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "scripts/pg.sh %v: %s", args, stderr.String())
	return strings.TrimSpace(string(out))
}

// sourceTables are the tables docs/operations/backup.md says to back up; rebuiltTables those whose
// rows a rebuild recomputes or that are ephemeral (their data is left out of the dump). A table in
// neither fails the drill: place it in the backup guide and here.
var (
	sourceTables = []string{"events", "streams", "receipts", "receipt_bodies", "reconciliation_items", "contacts", "free_texts", "subject_keys", "erasures", "erased_subjects", "process_steps", "process_step_finishes",
		"provider_sync_state", "provider_subscriptions", "provider_secrets", "provider_alerts", "seat_contacts",
		"relay_endpoints", "relay_deliveries", "relay_attempts", "relay_replays", "relay_alerts", "relay_endpoint_rules", "relay_operational_sends",
		"api_tokens", "schema_migrations", "river_job", "river_queue", "river_migration"}
	rebuiltTables = []string{"calendar_bookings", "calendar_resources", "calendar_resource_links", "calendar_slots", "calendar_booking_refs",
		"payment_streams", "payment_stream_refs", "projection_checkpoints", "river_leader", "river_notification", "ui_sessions",
		"job_instances"}
)

// dumpArgs is the pg_dump command of docs/operations/backup.md.
var dumpArgs = []string{"--format=custom", "--no-owner",
	"--exclude-table-data=calendar_*", "--exclude-table-data=payment_stream*",
	"--exclude-table-data=projection_checkpoints", "--exclude-table-data=river_leader", "--exclude-table-data=river_notification",
	"--exclude-table-data=ui_sessions", "--exclude-table-data=job_instances"}

// readSideSnapshot is what an operator sees: the calendar, every booking's history, and the
// reconciliation items, open and closed.
func readSideSnapshot(t *testing.T, env func(string) string, bookings []string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	out, stderr, code := cli(t, env, "calendar", "--from", "2030-02-01T00:00:00Z", "--to", "2030-02-03T00:00:00Z", "--json")
	require.Equal(t, 0, code, stderr)
	snap["calendar"] = out
	for _, b := range bookings {
		out, stderr, code = cli(t, env, "history", b, "--json")
		require.Equal(t, 0, code, stderr)
		snap["history "+b] = out
	}
	out, stderr, code = cli(t, env, "reconcile", "list", "--json")
	require.Equal(t, 0, code, stderr)
	snap["open items"] = out
	conn, err := pgx.Connect(context.Background(), env(envDatabaseURL))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT kind, subject, booking, other_booking, reason,
    coalesce(closed_by, ''), note, closed_at IS NULL FROM reconciliation_items ORDER BY kind, subject, id`)
	require.NoError(t, err)
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var (
			kind, subject, bk, other, reason, by, note string
			open                                       bool
		)
		err := r.Scan(&kind, &subject, &bk, &other, &reason, &by, &note, &open)
		return fmt.Sprintf("%s|%s|%s|%s|%s|%s|%s|open=%t", kind, subject, bk, other, reason, by, note, open), err
	})
	require.NoError(t, err)
	snap["all items"] = strings.Join(all, "\n")
	return snap
}

// TestBackupRestoreDrill is docs/operations/backup.md's drill: a scenario served, the source of truth
// dumped without the read models, restored into a new cluster, the read models rebuilt — and what
// operators see is identical; the restored cluster then records and projects new deliveries.
func TestBackupRestoreDrill(t *testing.T) {
	t.Parallel() // the slowest tests of the package overlap; each has its own database and ports
	pgDump, pgRestore := pgBin(t, "pg_dump"), pgBin(t, "pg_restore")
	srcURL := pgtest.NewEmptyDatabaseURL(t)
	base := map[string]string{
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
		"BOOKINGLEDGER_DRAIN_TIMEOUT":         "5s",
	}
	envFor := func(dbURL string) func(string) string {
		kv := map[string]string{envDatabaseURL: dbURL}
		for k, v := range base {
			kv[k] = v
		}
		return envOf(kv)
	}
	env := envFor(srcURL)

	// The scenario: a cancel that overtakes its create, two double bookings (one resolved by an
	// operator through the read API), a quarantined delivery.
	srv := startServe(t, env)
	const day = "2030-02-01T"
	send(t, env, srv.Base, "calendly", "invitee.canceled", "--booking", "d-late", "--start", day+"09:00:00Z")
	send(t, env, srv.Base, "calendly", "invitee.created", "--booking", "d-late", "--start", day+"09:00:00Z")
	for _, b := range []string{"d-a", "d-b"} {
		send(t, env, srv.Base, "calendly", "invitee.created", "--booking", b, "--start", day+"10:00:00Z")
	}
	for _, b := range []string{"d-c", "d-d"} {
		send(t, env, srv.Base, "calendly", "invitee.created", "--booking", b, "--start", day+"11:00:00Z", "--host", "other-host")
	}
	raw := filepath.Join(t.TempDir(), "body.json")
	require.NoError(t, os.WriteFile(raw, []byte(`{"event":"invitee.created","payload":{}}`), 0o600))
	send(t, env, srv.Base, "calendly", "--raw", raw)
	waitForCalendar(t, srv.AdminToken(t), srv.Admin, day+"00:00:00Z", "2030-02-02T00:00:00Z", map[string]string{
		"calendly-d-late": "canceled", "calendly-d-a": "active", "calendly-d-b": "conflict",
		"calendly-d-c": "active", "calendly-d-d": "conflict"})
	var items itemsAnswer
	waitFor(t, 30*time.Second, "two conflicts and a quarantined item", func() (bool, string) {
		raw := getJSON(t, srv.AdminToken(t), srv.Admin+"/api/reconciliation", &items)
		return len(items.Items) == 3, raw
	})
	for _, it := range items.Items {
		if it.Kind == "conflict" && it.Booking == "calendly-d-b" {
			status, body := httpDo(t, srv.AdminToken(t), "POST", fmt.Sprintf("%s/api/reconciliation/%d/resolve", srv.Admin, it.ID), `{"note":"host keeps both"}`)
			require.Equal(t, 200, status, body)
		}
	}
	srv.Stop(t)
	bookings := []string{"calendly-d-late", "calendly-d-a", "calendly-d-b", "calendly-d-c", "calendly-d-d"}
	before := readSideSnapshot(t, env, bookings)
	require.Contains(t, before["all items"], "host keeps both")
	require.Contains(t, before["history calendly-d-late"], "out_of_order")

	// Every table is either backed up or rebuilt.
	src := pgtest.Open(t, srcURL)
	rows, err := src.Query(context.Background(), `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	known := append(append([]string{}, sourceTables...), rebuiltTables...)
	for _, table := range tables {
		assert.Contains(t, known, table, "table %s is neither backed up nor rebuilt: place it in docs/operations/backup.md and this test", table)
	}

	// Dump, new cluster, restore.
	dump := filepath.Join(t.TempDir(), "bookingledger.dump")
	out, err := exec.Command(pgDump, append(dumpArgs, "--file="+dump, srcURL)...).CombinedOutput()
	require.NoError(t, err, "pg_dump: %s", out)
	dir, dstURL := newCluster(t)
	out, err = exec.Command(pgRestore, "--no-owner", "--exit-on-error", "--dbname="+dstURL, dump).CombinedOutput()
	require.NoError(t, err, "pg_restore: %s", out)
	dst, err := pgx.Connect(context.Background(), dstURL)
	require.NoError(t, err)
	count := func(q interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}, table string) int {
		var n int
		require.NoError(t, q.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n))
		return n
	}
	assert.Zero(t, count(dst, "calendar_bookings"), "the read models' rows are not in the dump")
	for _, table := range []string{"events", "receipts", "reconciliation_items"} {
		assert.Equal(t, count(src, table), count(dst, table), "%s restored", table)
	}
	dst.Close(context.Background())

	// The transaction-id step, when the new cluster is behind the old one (it usually is).
	_, stderr, code := cli(t, envFor(dstURL), "migrate")
	if code != 0 {
		m := regexp.MustCompile(`pg_resetwal -e (\d+)`).FindStringSubmatch(stderr)
		require.NotNil(t, m, "migrate on the restored cluster: %s", stderr)
		t.Logf("the new cluster was behind the restored transaction ids: pg_resetwal -e %s", m[1])
		dstURL = pgStart(t, "resetwal", dir, m[1])
		_, stderr, code = cli(t, envFor(dstURL), "migrate")
		require.Equal(t, 0, code, stderr)
	}
	dstEnv := envFor(dstURL)
	for _, projection := range []string{"calendar", "process"} {
		_, stderr, code = cli(t, dstEnv, "rebuild", projection, "--quiet")
		require.Equal(t, 0, code, "rebuild %s: %s", projection, stderr)
	}

	after := readSideSnapshot(t, dstEnv, bookings)
	for k := range before {
		assert.Equal(t, before[k], after[k], "%s after restore and rebuild", k)
	}

	// The restored cluster takes new deliveries, and they sort after the restored ones.
	restored := startServe(t, dstEnv)
	out2 := send(t, dstEnv, restored.Base, "calendly", "invitee.created", "--booking", "d-a", "--start", day+"10:00:00Z")
	assert.Contains(t, out2, `"status":"duplicate"`, "a redelivery of a restored delivery")
	send(t, dstEnv, restored.Base, "calendly", "invitee.created", "--booking", "d-new", "--start", day+"14:00:00Z")
	waitForCalendar(t, restored.AdminToken(t), restored.Admin, day+"00:00:00Z", "2030-02-02T00:00:00Z", map[string]string{
		"calendly-d-late": "canceled", "calendly-d-a": "active", "calendly-d-b": "conflict",
		"calendly-d-c": "active", "calendly-d-d": "conflict", "calendly-d-new": "active"})
	restored.Stop(t)
}

// TestPgScriptKeepsItsPort: a cluster of scripts/pg.sh comes back on the port it had, so that a URL
// written down (make run's .pgdata/demo.env) stays true across restarts. It runs beside the other
// tests: the port is one pg.sh drew below the kernel's range of ephemeral ports and found free, and
// the others' listeners bind ephemeral ports, so none of them can take it between stop and start.
// (Drawn from 20000-49999 until 2026-12-06, it once came back on another port in CI: a listener of
// another test had been handed it.)
func TestPgScriptKeepsItsPort(t *testing.T) {
	t.Parallel() // its own cluster, directory and port
	pgBin(t, "pg_ctl")
	dir, first := newCluster(t)
	require.NoError(t, exec.Command(pgScript, "stop", dir).Run())
	assert.Error(t, exec.Command(pgScript, "status", dir).Run(), "stopped")
	again := pgStart(t, "start", dir, "--fast")
	assert.Equal(t, first, again)
	assert.NoError(t, exec.Command(pgScript, "status", dir).Run(), "running")
}

// TestPgScriptPutsMemoryInHugePages: a durable cluster of scripts/pg.sh, as make run and make bench
// start, has its shared memory in 2 MB pages where root could reserve them, 256 MB of it for
// parallel queries, and its postmaster (so every backend) with malloc asking for transparent huge
// pages (glibc.malloc.hugetlb=1): ADR 0028, docs/operations/deploy.md.
//
// Not parallel: huge pages are one pool for the machine, and the other tests of this package start
// and stop clusters of their own. Run beside them, the check would depend on their timing (a CI run
// found the shared memory on 4 kB pages with all its pages reserved, and the cause was not settled).
func TestPgScriptPutsMemoryInHugePages(t *testing.T) {
	pgBin(t, "pg_ctl")
	if _, err := os.Stat("/proc/self/smaps"); err != nil {
		t.Skip("huge pages are checked through Linux's /proc")
	}
	dir, err := os.MkdirTemp("", "bl-hugepages-") // not t.TempDir: the cluster may run as postgres
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = exec.Command(pgScript, "stop", dir).Run()
		_ = os.RemoveAll(dir)
	})
	url := pgStart(t, "start", dir)

	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err, "the cluster answers")
	var parallel, needed, setting string
	require.NoError(t, conn.QueryRow(context.Background(), "SHOW min_dynamic_shared_memory").Scan(&parallel))
	assert.Equal(t, "256MB", parallel, "parallel queries' shared memory kept in the main segment")
	require.NoError(t, conn.QueryRow(context.Background(), "SHOW shared_memory_size_in_huge_pages").Scan(&needed))
	require.NoError(t, conn.QueryRow(context.Background(), "SHOW huge_pages").Scan(&setting))
	require.NoError(t, conn.Close(context.Background()))

	pidFile, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	require.NoError(t, err)
	pid := strings.SplitN(string(pidFile), "\n", 2)[0]
	environ, err := os.ReadFile("/proc/" + pid + "/environ")
	require.NoError(t, err)
	var tunables []string // the environment is not printed: it may hold secrets
	for _, v := range strings.Split(string(environ), "\x00") {
		if rest, ok := strings.CutPrefix(v, "GLIBC_TUNABLES="); ok {
			tunables = strings.Split(rest, ":")
		}
	}
	assert.Contains(t, tunables, "glibc.malloc.hugetlb=1", "the postmaster's GLIBC_TUNABLES")

	reserved, err := os.ReadFile(filepath.Join(dir, "hugepages"))
	if os.Getuid() != 0 || err != nil || strings.TrimSpace(string(reserved)) == "0" {
		if os.Getuid() == 0 {
			// No pages of its own: it must not take pages another cluster reserved.
			assert.Equal(t, "off", setting, "huge_pages of a root cluster without reserved pages")
		}
		if os.Getenv("CI") == "true" && os.Getuid() == 0 {
			t.Fatalf("CI=true as root: pg.sh reserved no huge pages for its cluster (%q, %v)", reserved, err)
		}
		t.Logf("no huge pages reserved (not root, or the kernel had none to give): the shared memory has normal pages")
		return
	}
	require.Equal(t, needed, strings.TrimSpace(string(reserved)),
		"pg.sh reserved fewer huge pages than the cluster needs (it gives back a partial reservation)")
	assert.Equal(t, "try", setting, "huge_pages of a cluster with its pages reserved")
	smaps, err := os.ReadFile("/proc/" + pid + "/smaps")
	require.NoError(t, err)
	if !regexp.MustCompile(`(?m)^KernelPageSize:\s+2048 kB$`).Match(smaps) {
		// What the pool held, and what the cluster's log says, instead of the whole smaps.
		meminfo, _ := os.ReadFile("/proc/meminfo")
		var pool []string
		for _, l := range strings.Split(string(meminfo), "\n") {
			if strings.HasPrefix(l, "HugePages_") {
				pool = append(pool, l)
			}
		}
		serverLog, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		t.Errorf("the postmaster maps its shared memory in 4 kB pages, though pg.sh reserved %s huge pages for it; the pool now: %s; server.log:\n%s",
			needed, strings.Join(pool, ", "), serverLog)
	}
}
