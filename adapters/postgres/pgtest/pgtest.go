package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/postgres"
)

// EnvURL names the variable holding the URL of the cluster tests create their databases in. The
// database it names is only used to connect; it is never written to.
const EnvURL = "BOOKINGLEDGER_TEST_DATABASE_URL"

// maxConns is enough for the concurrency tests (several transactions held open at once) while many
// test databases share one cluster's max_connections.
const maxConns = 12

// NewDatabase returns a pool on a fresh, migrated database, closed and dropped at the end of the test.
func NewDatabase(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return Open(t, NewDatabaseURL(t))
}

// NewDatabaseURL creates a fresh, migrated database and returns its URL; it is dropped at the end of the
// test (FORCE: connections still open are closed).
//
// The database is a copy (CREATE DATABASE ... TEMPLATE) of a template migrated once per cluster and
// migration set: see migratedTemplate. Copying is faster than migrating. STRATEGY FILE_COPY copies
// the files: for a database this small (mostly the system catalogs) it took half the server CPU of
// the default WAL_LOG, which writes every page to the WAL, and less time, on the test cluster
// (fsync off, so its checkpoints are cheap).
func NewDatabaseURL(t testing.TB) string {
	t.Helper()
	return NewDatabaseURLWith(t, Extra{})
}

// Extra is more schema a test package's databases need besides the embedded migrations (River's
// tables, say), built into a template of its own once per cluster instead of into every database: a
// migration is DDL, which costs the server far more CPU than copying the files it made.
type Extra struct {
	// Name tells the templates apart: one to sixteen lowercase letters.
	Name string
	// Migrate applies the extra schema to a database that has the embedded migrations. The template
	// is not rebuilt when what Migrate applies changes: a test that must have the newest extra schema
	// runs its migration again on its database (a no-op when the template had it).
	Migrate func(ctx context.Context, pool *pgxpool.Pool) error
}

// NewDatabaseWith is NewDatabase with extra applied too.
func NewDatabaseWith(t testing.TB, extra Extra) *pgxpool.Pool {
	t.Helper()
	return Open(t, NewDatabaseURLWith(t, extra))
}

// NewDatabaseURLWith is NewDatabaseURL with extra applied too (nothing more for the zero Extra).
func NewDatabaseURLWith(t testing.TB, extra Extra) string {
	t.Helper()
	base := baseURL(t)
	tmpl := migratedTemplate(t, base, extra)
	return createDatabase(t, base, "TEMPLATE "+pgx.Identifier{tmpl}.Sanitize()+" STRATEGY FILE_COPY")
}

// NewEmptyDatabaseURL is NewDatabaseURL without the migrations, for tests of the migrations themselves.
func NewEmptyDatabaseURL(t testing.TB) string {
	t.Helper()
	return createDatabase(t, baseURL(t), "")
}

// baseURL returns the cluster URL from EnvURL, or skips the test (fails it under CI=true) without one.
func baseURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgtest: %s is not set (CI=true: database tests must run); run `make test`, which starts a private PostgreSQL", EnvURL)
		}
		t.Skipf("pgtest: needs PostgreSQL: run `make test`, which starts a private PostgreSQL, or set %s", EnvURL)
	}
	return base
}

// createDatabase creates a database with a random name (CREATE DATABASE name options), drops it at
// the end of the test and returns its URL.
func createDatabase(t testing.TB, base, options string) string {
	t.Helper()
	name := randomName(t, "bl_test_")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if options != "" {
		create += " " + options
	}
	if err := adminExec(ctx, base, create); err != nil {
		t.Fatalf("pgtest: create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := adminExec(ctx, base, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop test database %s: %v", name, err)
		}
	})
	u, err := withDatabase(base, name)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvURL, err)
	}
	return u
}

// templateLockKey is the advisory lock (taken in the database of EnvURL, which every test binary
// connects to) that serializes building templates: `go test -p 2` runs two test binaries at once.
const templateLockKey int64 = 0x626c5f746d706c74 // "bl_tmplt"

// templatePrefix starts the names of migrated templates; the rest is the migration set's digest.
const templatePrefix = "bl_template_"

// templates are this process's migrated templates, by Extra.Name, once known.
var templates struct {
	mu    sync.Mutex
	names map[string]string
}

// extraName is what Extra.Name may be: letters only and at most sixteen, so that a template's name
// never looks like an unfinished build's (see buildTemplate).
var extraName = regexp.MustCompile(`^[a-z]{1,16}$`)

// migratedTemplate returns the name of a database holding the embedded migrations and nothing else,
// building it when the cluster has none for this migration set. Its name carries
// postgres.MigrationsDigest, so adding or editing a migration makes a new template instead of reusing
// a stale one. It is built under another name and renamed when complete, under an advisory lock that
// other test binaries wait on, so a template with the final name is always whole. It refuses
// connections (ALLOW_CONNECTIONS false): CREATE DATABASE ... TEMPLATE needs it unused. A template
// with an Extra is named after it too and holds its schema as well.
func migratedTemplate(t testing.TB, base string, extra Extra) string {
	t.Helper()
	templates.mu.Lock()
	defer templates.mu.Unlock()
	if name, ok := templates.names[extra.Name]; ok {
		return name
	}
	name := templatePrefix + postgres.MigrationsDigest()[:24]
	migrate := postgres.Migrate
	if extra.Name != "" {
		if !extraName.MatchString(extra.Name) || extra.Migrate == nil {
			t.Fatalf("pgtest: Extra %q: a name of 1 to 16 lowercase letters and a Migrate", extra.Name)
		}
		name += "_" + extra.Name
		migrate = func(ctx context.Context, pool *pgxpool.Pool) error {
			if err := postgres.Migrate(ctx, pool); err != nil {
				return err
			}
			if err := extra.Migrate(ctx, pool); err != nil {
				return fmt.Errorf("%s: %w", extra.Name, err)
			}
			return nil
		}
	}
	// Migrate waits up to five minutes for its own lock; a template is built within seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := buildTemplate(ctx, base, name, randomName(t, name+"_b"), migrate); err != nil {
		t.Fatalf("pgtest: migrated template database: %v", err)
	}
	if templates.names == nil {
		templates.names = map[string]string{}
	}
	templates.names[extra.Name] = name
	return name
}

// unfinished matches the builds of templates (name + "_b" + 16 hex digits) and no template.
var unfinished = "^" + templatePrefix + "[0-9a-f]+(_[a-z]+)?_b[0-9a-f]{16}$"

func buildTemplate(ctx context.Context, base, name, build string, migrate func(context.Context, *pgxpool.Pool) error) error {
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, templateLockKey); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	// Closing the connection would release the lock too; unlocking says so.
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, templateLockKey) //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	// Builds left behind by a test binary killed halfway: nobody else builds while we hold the lock.
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE datname ~ $1`, unfinished)
	if err != nil {
		return err
	}
	stale, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, db := range stale {
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop unfinished template %s: %w", db, err)
		}
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{build}.Sanitize()); err != nil {
		return err
	}
	u, err := withDatabase(base, build)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return err
	}
	err = migrate(ctx, pool)
	pool.Close()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, sql := range []string{
		"ALTER DATABASE " + pgx.Identifier{build}.Sanitize() + " RENAME TO " + pgx.Identifier{name}.Sanitize(),
		"ALTER DATABASE " + pgx.Identifier{name}.Sanitize() + " WITH ALLOW_CONNECTIONS false",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return err
		}
	}
	return nil
}

// Open returns a pool on databaseURL, closed at the end of the test.
func Open(t testing.TB, databaseURL string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		t.Fatalf("pgtest: parse database URL: %v", err)
	}
	cfg.MaxConns = maxConns
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// admins holds one small pool per cluster URL (the database of EnvURL) for CREATE and DROP DATABASE,
// kept open while the test binary runs. A new PostgreSQL connection is a process fork and a backend
// start, about 35 ms of the server's CPU on the loaded two-core CI machine: a connection of its own
// for each CREATE and each DROP was two of them per test database (250 of a readmodel run's 1,300
// connections, 89 of httpapi's 150). The pools are never closed: their connections end with the
// test binary.
var admins struct {
	mu    sync.Mutex
	pools map[string]*pgxpool.Pool
}

// adminConns bounds the statements a test binary runs on the cluster's database at once: CREATE and
// DROP DATABASE of the tests running in parallel, which the server mostly serializes anyway.
const adminConns = 4

// adminExec runs sql (no arguments, outside a transaction: CREATE and DROP DATABASE refuse to run in
// one) on the database of databaseURL through the test binary's pool for it.
func adminExec(ctx context.Context, databaseURL, sql string) error {
	admins.mu.Lock()
	pool, ok := admins.pools[databaseURL]
	if !ok {
		cfg, err := pgxpool.ParseConfig(databaseURL)
		if err != nil {
			admins.mu.Unlock()
			return err
		}
		cfg.MaxConns = adminConns
		pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			admins.mu.Unlock()
			return err
		}
		if admins.pools == nil {
			admins.pools = map[string]*pgxpool.Pool{}
		}
		admins.pools[databaseURL] = pool
	}
	admins.mu.Unlock()
	_, err := pool.Exec(ctx, sql)
	return err
}

func exec(ctx context.Context, databaseURL, sql string) error {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

func randomName(t testing.TB, prefix string) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("pgtest: random database name: %v", err)
	}
	return prefix + hex.EncodeToString(b[:])
}

// withDatabase returns databaseURL pointing at database name. It accepts both connection-string forms
// libpq and pgx accept: URLs and key=value lists.
func withDatabase(databaseURL, name string) (string, error) {
	if strings.HasPrefix(databaseURL, "postgres://") || strings.HasPrefix(databaseURL, "postgresql://") {
		u, err := url.Parse(databaseURL)
		if err != nil {
			return "", fmt.Errorf("parse URL: %w", err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	return databaseURL + " dbname=" + name, nil // a later key overrides an earlier one
}
