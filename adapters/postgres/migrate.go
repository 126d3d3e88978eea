package postgres

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// migrationFiles is the schema, applied in version order by goose (docs/adr/0007-migrations-with-goose.md).
// A package-level variable because embed needs one; it is read-only.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockKey is the advisory lock that serializes migration runs on one database (two `serve`
// processes starting at once). Advisory locks are per database, so test databases in one cluster do
// not wait for each other.
const migrationLockKey int64 = 0x626c5f6d69677261 // "bl_migra"

// migrationTable records applied versions (goose's bookkeeping).
const migrationTable = "schema_migrations"

// migrationName is the house naming rule: four digits, an underscore, lowercase words. goose itself
// would accept more; one rule keeps the directory sorted and the versions readable.
var migrationName = regexp.MustCompile(`^[0-9]{4}_[a-z0-9_]+\.sql$`)

// Migrate applies the embedded migrations not yet applied, each in its own transaction, in version
// order. It refuses (ErrSchemaNewer) a database that holds migrations it does not embed. Concurrent calls are safe: goose holds a session advisory lock for the run, and a caller
// that waited finds the work done. A migration file that must run outside a transaction says so with
// `-- +goose NO TRANSACTION`. After migrating it checks the transaction-id horizon (CheckTransactionIDs).
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return migrate(ctx, pool, migrationFiles)
}

// MigrationsDigest returns a hex SHA-256 of the embedded migration files (names and contents, in
// version order): two binaries with the same digest apply the same schema. Test helpers key their
// migrated template databases by it (pgtest), so a new or edited migration never meets a stale one.
func MigrationsDigest() string {
	return migrationsDigest(migrationFiles)
}

func migrationsDigest(fsys fs.FS) string {
	h := sha256.New()
	names, _ := fs.Glob(fsys, "migrations/*.sql") // the pattern is valid: no error
	for _, name := range names {                  // fs.Glob sorts them
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			body = []byte("unreadable: " + err.Error())
		}
		fmt.Fprintf(h, "%s %d\n", name, len(body))
		h.Write(body)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Pending returns the names (file name without .sql) of the embedded migrations not yet applied, for
// /readyz.
func Pending(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	return pending(ctx, pool, migrationFiles)
}

// newMigrator returns a goose provider over the migrations/ directory of fsys and the sql.DB it uses
// (a view of the pool: closing it leaves the pool open).
func newMigrator(pool *pgxpool.Pool, fsys fs.FS) (*goose.Provider, func(), error) {
	dir, err := fs.Sub(fsys, "migrations")
	if err != nil {
		return nil, nil, fmt.Errorf("migrations: %w", err)
	}
	names, err := fs.Glob(dir, "*.sql")
	if err != nil {
		return nil, nil, fmt.Errorf("list migrations: %w", err)
	}
	for _, name := range names {
		if !migrationName.MatchString(path.Base(name)) {
			return nil, nil, fmt.Errorf("migration %s: name must look like 0001_name.sql", name)
		}
	}
	// Probe the lock every second (goose's default is five), for five minutes.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockKey), lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, nil, fmt.Errorf("migration lock: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	p, err := goose.NewProvider(goose.DialectPostgres, db, dir,
		goose.WithSessionLocker(locker), goose.WithTableName(migrationTable), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("migrations: %w", err)
	}
	return p, func() { _ = db.Close() }, nil
}

// ErrSchemaNewer: the database holds migrations this binary does not embed — a newer bookingledger
// migrated it. Running against it could misread or corrupt what the newer code wrote
// (docs/operations/upgrades.md), so the old binary stops instead.
var ErrSchemaNewer = errors.New("the database schema is newer than this binary")

// NewerVersions returns the versions (as "0070") applied to the database that this binary does not
// embed, in order; none on a database not migrated yet.
func NewerVersions(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	return newerVersions(ctx, pool, migrationFiles)
}

func newerVersions(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) ([]string, error) {
	p, done, err := newMigrator(pool, fsys)
	if err != nil {
		return nil, err
	}
	defer done()
	known := map[int64]bool{}
	for _, src := range p.ListSources() {
		known[src.Version] = true
	}
	applied, err := appliedVersions(ctx, pool)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, v := range slices.Sorted(maps.Keys(applied)) {
		if !known[v] {
			out = append(out, fmt.Sprintf("%04d", v))
		}
	}
	return out, nil
}

// appliedVersions returns the versions applied to the database, read in one statement (goose's own
// status asks once per migration: a hundred statements for every /readyz probe); none on a database
// not migrated yet.
func appliedVersions(ctx context.Context, pool *pgxpool.Pool) (map[int64]bool, error) {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, migrationTable).Scan(&exists); err != nil {
		return nil, fmt.Errorf("migration status: %w", translate(err))
	}
	applied := map[int64]bool{}
	if !exists {
		return applied, nil
	}
	rows, err := pool.Query(ctx, `SELECT DISTINCT version_id FROM `+migrationTable+` WHERE version_id > 0 AND is_applied`)
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", translate(err))
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("migration status: %w", translate(err))
	}
	for _, v := range versions {
		applied[v] = true
	}
	return applied, nil
}

// CheckNotNewer returns ErrSchemaNewer, naming the versions, when the database holds migrations this
// binary does not embed.
func CheckNotNewer(ctx context.Context, pool *pgxpool.Pool) error {
	return checkNotNewer(ctx, pool, migrationFiles)
}

func checkNotNewer(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) error {
	newer, err := newerVersions(ctx, pool, fsys)
	if err != nil {
		return err
	}
	if len(newer) > 0 {
		return fmt.Errorf("%w: it has migration(s) %s, which this binary does not know; run the bookingledger "+
			"release that applied them (or a later one) — migrations are forward-only", ErrSchemaNewer, strings.Join(newer, ", "))
	}
	return nil
}

// migrate refuses a schema newer than fsys (ErrSchemaNewer), then applies what is pending.
func migrate(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) error {
	if err := checkNotNewer(ctx, pool, fsys); err != nil {
		return err
	}
	p, done, err := newMigrator(pool, fsys)
	if err != nil {
		return err
	}
	defer done()
	if _, err := p.Up(ctx); err != nil {
		var perr *goose.PartialError
		if errors.As(err, &perr) && perr.Failed != nil {
			return fmt.Errorf("migration %s: %w", migrationVersionName(perr.Failed.Source), translate(perr.Err))
		}
		return fmt.Errorf("migrate: %w", translate(err))
	}
	return CheckTransactionIDs(ctx, pool)
}

func pending(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) ([]string, error) {
	p, done, err := newMigrator(pool, fsys)
	if err != nil {
		return nil, err
	}
	defer done()
	applied, err := appliedVersions(ctx, pool)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, src := range p.ListSources() { // in version order
		if !applied[src.Version] {
			out = append(out, migrationVersionName(src))
		}
	}
	return out, nil
}

func migrationVersionName(src *goose.Source) string {
	if src == nil {
		return "?"
	}
	return strings.TrimSuffix(path.Base(src.Path), ".sql")
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
