package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
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
func NewDatabaseURL(t testing.TB) string {
	t.Helper()
	u := NewEmptyDatabaseURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatalf("pgtest: open test database: %v", err)
	}
	defer pool.Close()
	if err := postgres.Migrate(ctx, pool); err != nil {
		t.Fatalf("pgtest: migrate test database: %v", err)
	}
	return u
}

// NewEmptyDatabaseURL is NewDatabaseURL without the migrations, for tests of the migrations themselves.
func NewEmptyDatabaseURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgtest: %s is not set (CI=true: database tests must run); run `make test`, which starts a private PostgreSQL", EnvURL)
		}
		t.Skipf("pgtest: needs PostgreSQL: run `make test`, which starts a private PostgreSQL, or set %s", EnvURL)
	}
	name := randomName(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := exec(ctx, base, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create test database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := exec(ctx, base, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop test database %s: %v", name, err)
		}
	})
	u, err := withDatabase(base, name)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvURL, err)
	}
	return u
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

func exec(ctx context.Context, databaseURL, sql string) error {
	conn, err := pgx.Connect(ctx, databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

func randomName(t testing.TB) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("pgtest: random database name: %v", err)
	}
	return "bl_test_" + hex.EncodeToString(b[:])
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
