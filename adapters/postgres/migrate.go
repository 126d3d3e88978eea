package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationFiles is the schema, applied in file-name order. A package-level variable because embed
// needs one; it is read-only.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockKey is the pg_advisory_lock key that serializes migration runs on one database (two
// `serve` processes starting at once). Advisory locks are per database, so test databases in one
// cluster do not wait for each other.
const migrationLockKey int64 = 0x626c5f6d69677261 // "bl_migra"

var migrationName = regexp.MustCompile(`^[0-9]{4}_[a-z0-9_]+\.sql$`)

type migration struct {
	version string // file name without .sql, e.g. 0001_event_store
	sql     string
}

// Migrate applies the embedded migrations not yet recorded in schema_migrations, each in its own
// transaction, in name order. Concurrent calls are safe: the run holds an advisory lock, and a caller
// that waited finds the work done. A migration file must therefore not contain statements that cannot
// run in a transaction block (CREATE INDEX CONCURRENTLY) or its own BEGIN/COMMIT.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return migrate(ctx, pool, migrationFiles)
}

// Pending returns the versions of the embedded migrations not yet applied (for /readyz).
func Pending(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	return pending(ctx, pool, migrationFiles)
}

func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	sort.Strings(names)
	out := make([]migration, 0, len(names))
	for _, name := range names {
		base := path.Base(name)
		if !migrationName.MatchString(base) {
			return nil, fmt.Errorf("migration %s: name must look like 0001_name.sql", base)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", base, err)
		}
		out = append(out, migration{version: strings.TrimSuffix(base, ".sql"), sql: string(b)})
	}
	return out, nil
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

func migrate(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) (err error) {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", translate(err))
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLockKey); err != nil {
		return fmt.Errorf("migrate: take migration lock: %w", translate(err))
	}
	defer func() {
		// Unlock even when ctx ended; if that fails, closing the session releases the lock.
		unlockCtx := context.WithoutCancel(ctx)
		if _, uerr := conn.Exec(unlockCtx, `SELECT pg_advisory_unlock($1)`, migrationLockKey); uerr != nil {
			_ = conn.Conn().Close(unlockCtx)
		}
	}()

	// Under the lock: CREATE TABLE IF NOT EXISTS is not safe against itself when run concurrently.
	if _, err := conn.Exec(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", translate(err))
	}
	applied, err := appliedVersions(ctx, conn)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		if err := applyMigration(ctx, conn, m); err != nil {
			return err
		}
	}
	return checkTransactionIDs(ctx, conn)
}

// ErrTransactionIDsBehind: the events table holds transaction ids this cluster has not reached, which
// happens when a logical dump is restored into a new cluster. New events would sort before restored
// ones and readers past them would never see them (docs/adr/0002-global-order-on-postgres.md).
var ErrTransactionIDsBehind = errors.New("cluster transaction ids are behind the stored events")

// CheckTransactionIDs returns ErrTransactionIDsBehind when stored events carry transaction ids at or
// beyond the cluster's next one. Migrate runs it; it costs one index probe.
func CheckTransactionIDs(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("check transaction ids: %w", translate(err))
	}
	defer conn.Release()
	return checkTransactionIDs(ctx, conn)
}

func checkTransactionIDs(ctx context.Context, conn *pgxpool.Conn) error {
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('events') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("check transaction ids: %w", translate(err))
	}
	if !exists {
		return nil // no event store in this schema (yet)
	}
	var stored, next uint64
	err := conn.QueryRow(ctx, `SELECT coalesce((SELECT tx_id FROM events ORDER BY tx_id DESC LIMIT 1), '0'::xid8),
    pg_snapshot_xmax(pg_current_snapshot())`).Scan(&stored, &next)
	if err != nil {
		return fmt.Errorf("check transaction ids: %w", translate(err))
	}
	if stored >= next {
		return fmt.Errorf("%w: events go up to transaction %d, the cluster is at %d; stop the cluster and run "+
			"pg_resetwal -e %d (next transaction id epoch) before serving", ErrTransactionIDsBehind, stored, next, stored>>32+1)
	}
	return nil
}

func applyMigration(ctx context.Context, conn *pgxpool.Conn, m migration) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migration %s: begin: %w", m.version, translate(err))
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // no-op after Commit
	// The simple protocol runs a file of several statements as written.
	if _, err := tx.Conn().PgConn().Exec(ctx, m.sql).ReadAll(); err != nil {
		return fmt.Errorf("migration %s: %w", m.version, translate(err))
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, m.version); err != nil {
		return fmt.Errorf("migration %s: record: %w", m.version, translate(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migration %s: commit: %w", m.version, translate(err))
	}
	return nil
}

func appliedVersions(ctx context.Context, conn *pgxpool.Conn) (map[string]bool, error) {
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", translate(err))
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", translate(err))
	}
	applied := make(map[string]bool, len(versions))
	for _, v := range versions {
		applied[v] = true
	}
	return applied, nil
}

func pending(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) ([]string, error) {
	ms, err := loadMigrations(fsys)
	if err != nil {
		return nil, err
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('schema_migrations') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, fmt.Errorf("pending migrations: %w", translate(err))
	}
	applied := map[string]bool{}
	if exists {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("pending migrations: %w", translate(err))
		}
		applied, err = appliedVersions(ctx, conn)
		conn.Release()
		if err != nil {
			return nil, fmt.Errorf("pending migrations: %w", err)
		}
	}
	out := []string{}
	for _, m := range ms {
		if !applied[m.version] {
			out = append(out, m.version)
		}
	}
	return out, nil
}
