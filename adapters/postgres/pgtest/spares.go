package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Spares hands a test package's tests migrated databases that are emptied and reused, with their
// pools' warm connections, instead of a new database per test. A fresh database costs the server a
// CREATE and a DROP DATABASE and a new backend, its catalog caches filled from nothing, for every
// connection its pool opens (readmodel's tests: 1,073 connections and 122 databases a run before,
// 90 and 16 with spares; the cluster's CPU 155 s before, 45 s after). Emptying one costs a DELETE
// of each table that was empty when the database was made.
//
// A database goes back only when its test passed, nothing but its pool is connected to it, no
// advisory lock is held in it, its schema (tables, columns, indexes, constraints, triggers, owners,
// grants, functions) is still a fresh database's and the rows the migrations put in are unchanged;
// any other database is dropped. So each test starts on what a new database holds. A package using
// Spares calls Close from TestMain after m.Run; a killed test binary leaves its spares behind in the
// throwaway test cluster.
type Spares struct {
	// Extra is more schema the databases have (River's tables, say), as for NewDatabaseWith.
	Extra Extra

	mu   sync.Mutex
	free []*spare
	all  []*spare
}

type spare struct {
	name string
	pool *pgxpool.Pool
	// fingerprint is the schema's when the database was made; empty empties the tables that were
	// empty then; seeded digests the rows of the others (the migrations' bookkeeping), and rows is
	// what it gave then.
	fingerprint, empty, seeded, rows string
	// stamp is the catalogs' stamp (catalogStampSQL) when the schema last had that fingerprint.
	stamp string
}

// Database returns a pool on an empty migrated database for tb, a spare one when there is one. The
// pool is not tb's to close: at the end of tb the database goes back to s (or is dropped).
func (s *Spares) Database(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	s.mu.Lock()
	var sp *spare
	if n := len(s.free); n > 0 {
		sp, s.free = s.free[n-1], s.free[:n-1]
	}
	s.mu.Unlock()
	if sp == nil {
		sp = s.create(tb)
	}
	tb.Cleanup(func() { s.giveBack(tb, sp) })
	return sp.pool
}

func (s *Spares) create(tb testing.TB) *spare {
	tb.Helper()
	base := baseURL(tb)
	tmpl := migratedTemplate(tb, base, s.Extra)
	name := randomName(tb, "bl_test_")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := adminExec(ctx, base, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tmpl}.Sanitize()+" STRATEGY FILE_COPY"); err != nil {
		tb.Fatalf("pgtest: create test database: %v", err)
	}
	sp := &spare{name: name}
	s.mu.Lock()
	s.all = append(s.all, sp)
	s.mu.Unlock()
	u, err := withDatabase(base, name)
	if err != nil {
		tb.Fatalf("pgtest: %s: %v", EnvURL, err)
	}
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		tb.Fatalf("pgtest: parse database URL: %v", err)
	}
	cfg.MaxConns = maxConns
	if sp.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		tb.Fatalf("pgtest: open pool: %v", err)
	}
	if err := sp.survey(ctx); err != nil {
		tb.Fatalf("pgtest: survey a fresh test database: %v", err)
	}
	return sp
}

// survey records what a fresh database is: its schema's fingerprint, the statement that empties the
// tables that are empty, the one that digests the rows of the others, and that digest.
func (sp *spare) survey(ctx context.Context) error {
	fp, err := fingerprint(ctx, sp.pool)
	if err != nil {
		return err
	}
	if err := sp.pool.QueryRow(ctx, catalogStampSQL).Scan(&sp.stamp); err != nil {
		return err
	}
	rows, err := sp.pool.Query(ctx, `SELECT format('%I.%I', schemaname, tablename) FROM pg_tables
WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1`)
	if err != nil {
		return err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	var empty, seeded []string
	for _, t := range tables {
		var has bool
		if err := sp.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+t+`)`).Scan(&has); err != nil {
			return err
		}
		if has {
			seeded = append(seeded, `(SELECT md5(string_agg(x::text, ',' ORDER BY x::text)) FROM `+t+` x)`)
		} else {
			empty = append(empty, t)
		}
	}
	if len(empty) == 0 || len(seeded) == 0 {
		return fmt.Errorf("%d empty and %d seeded tables", len(empty), len(seeded))
	}
	// DELETE, not TRUNCATE: a test leaves a few hundred rows at most, and TRUNCATE's new files for
	// every table and index cost the server 80 ms a time, the DELETEs 5 ms. The replica role skips
	// the foreign keys' triggers, so the order of the tables does not matter.
	sp.fingerprint = fp
	sp.empty = `BEGIN; SET LOCAL lock_timeout = '10s'; SET LOCAL session_replication_role = replica;
DELETE FROM ` + strings.Join(empty, "; DELETE FROM ") + `;
SELECT setval(s.seqrelid, s.seqstart, false) FROM pg_sequence s; COMMIT`
	sp.seeded = `SELECT concat_ws(' ', ` + strings.Join(seeded, ", ") + `)`
	return sp.pool.QueryRow(ctx, sp.seeded).Scan(&sp.rows)
}

// giveBack empties sp for the next test, or drops it when it cannot be trusted to equal a fresh one.
func (s *Spares) giveBack(tb testing.TB, sp *spare) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := errors.New("the test failed")
	if !tb.Failed() {
		err = sp.reset(ctx)
	}
	if err == nil {
		s.mu.Lock()
		s.free = append(s.free, sp)
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	for i, o := range s.all {
		if o == sp {
			s.all = append(s.all[:i], s.all[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	tb.Logf("pgtest: test database %s dropped, not reused: %v", sp.name, err)
	if err := sp.drop(ctx); err != nil {
		tb.Errorf("pgtest: drop test database %s: %v", sp.name, err)
	}
}

// reset empties the database when nothing but the pool's idle connections is in it, no advisory lock
// is held, and its schema and seeded rows are a fresh database's.
func (sp *spare) reset(ctx context.Context) error {
	sp.settle(ctx)
	if n := sp.pool.Stat().AcquiredConns(); n > 0 {
		return fmt.Errorf("%d connections still in use", n)
	}
	conn, err := sp.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	var sessions, locks int
	if err := conn.QueryRow(ctx, `SELECT
  (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()),
  (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`).
		Scan(&sessions, &locks); err != nil {
		return err
	}
	if total := int(sp.pool.Stat().TotalConns()); sessions > total || locks > 0 {
		return fmt.Errorf("%d sessions (the pool has %d), %d advisory locks", sessions, total, locks)
	}
	if err := sp.sameSchema(ctx, conn); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, sp.empty); err != nil {
		return err
	}
	var rows string
	if err := conn.QueryRow(ctx, sp.seeded).Scan(&rows); err != nil {
		return err
	}
	if rows != sp.rows {
		return errors.New("the rows the migrations put in changed")
	}
	return nil
}

// sameSchema returns an error when the schema is not the one the database had when it was made. The
// catalogs' stamp answers in a few milliseconds when no catalog row was written since the last check;
// only then is the fingerprint (80 ms of the server's time) computed again, and a schema changed and
// changed back (a rebuild's staged swap, say) is the fresh one again under a new stamp.
func (sp *spare) sameSchema(ctx context.Context, q querier) error {
	var stamp string
	if err := q.QueryRow(ctx, catalogStampSQL).Scan(&stamp); err != nil {
		return err
	}
	if stamp == sp.stamp {
		return nil
	}
	if fp, err := fingerprint(ctx, q); err != nil {
		return err
	} else if fp != sp.fingerprint {
		return errors.New("the schema differs from a fresh database's")
	}
	sp.stamp = stamp
	return nil
}

// settle waits, 5 s at most, until no connection of the pool has been in use for 100 ms and nothing
// but the pool's connections is in the database. A test's stores may still be at work when it ends (a
// postgres.Store sends its NOTIFY from a goroutine of its own up to 20 ms after the last write), and a
// closed connection's server process ends a moment after the close: without the wait such a database
// would be dropped, not reused.
func (sp *spare) settle(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	const tick = 5 * time.Millisecond
	for idle := time.Duration(0); idle < 100*time.Millisecond && ctx.Err() == nil; time.Sleep(tick) {
		if sp.pool.Stat().AcquiredConns() > 0 {
			idle = 0
		} else {
			idle += tick
		}
	}
	for ctx.Err() == nil {
		var sessions int32
		if err := sp.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()`).Scan(&sessions); err != nil ||
			sessions <= sp.pool.Stat().TotalConns() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (sp *spare) drop(ctx context.Context) error {
	if sp.pool != nil {
		sp.pool.Close()
	}
	base := os.Getenv(EnvURL)
	if base == "" {
		return nil
	}
	return adminExec(ctx, base, "DROP DATABASE IF EXISTS "+pgx.Identifier{sp.name}.Sanitize()+" WITH (FORCE)")
}

// Close drops every database of s, spare or still in use: TestMain calls it after m.Run.
func (s *Spares) Close() error {
	s.mu.Lock()
	all := s.all
	s.all, s.free = nil, nil
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, sp := range all {
		if err := sp.drop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("pgtest: drop test database %s: %w", sp.name, err))
		}
	}
	return errors.Join(errs...)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// fingerprint is a digest of the database's own schema objects, by name and definition.
func fingerprint(ctx context.Context, q querier) (string, error) {
	var fp string
	err := q.QueryRow(ctx, fingerprintSQL).Scan(&fp)
	return fp, err
}

// catalogStampSQL stamps the catalogs fingerprintSQL reads: each one's row count and the newest
// transaction that wrote one of its rows. Any DDL inserts or updates rows of them (a new xmin) or
// deletes some (a lower count), so an unchanged stamp means an unchanged schema; the converse does not
// hold (TRUNCATE writes a new pg_class row for an unchanged table), which the fingerprint settles.
// VACUUM and ANALYZE update pg_class in place, without a new xmin.
const catalogStampSQL = `SELECT concat_ws(' ',
  (SELECT count(*) || '/' || max(xmin::text::bigint) FROM pg_class),
  (SELECT count(*) || '/' || max(xmin::text::bigint) FROM pg_attribute),
  (SELECT count(*) || '/' || max(xmin::text::bigint) FROM pg_attrdef),
  (SELECT count(*) || '/' || max(xmin::text::bigint) FROM pg_index),
  (SELECT count(*) || '/' || max(xmin::text::bigint) FROM pg_constraint),
  (SELECT count(*) || '/' || max(xmin::text::bigint) FROM pg_trigger),
  (SELECT count(*) || '/' || max(xmin::text::bigint) FROM pg_proc),
  (SELECT count(*) || '/' || max(xmin::text::bigint) FROM pg_namespace),
  (SELECT count(*) || '/' || max(xmin::text::bigint) FROM pg_extension))`

// fingerprintSQL digests the schema: relations, columns, indexes, constraints, triggers, functions
// (by source), extensions, with their owners and grants.
const fingerprintSQL = `SELECT md5(string_agg(d, E'\n' ORDER BY d)) FROM (
  SELECT format('rel %s.%s %s %s %s %s', n.nspname, c.relname, c.relkind, c.relpersistence, pg_get_userbyid(c.relowner), c.relacl)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast'
  UNION ALL
  SELECT format('col %s.%s %s %s %s %s', c.relnamespace::regnamespace, c.relname, a.attname, format_type(a.atttypid, a.atttypmod),
    a.attnotnull, pg_get_expr(ad.adbin, ad.adrelid))
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
  WHERE a.attnum > 0 AND NOT a.attisdropped AND c.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
    AND c.relnamespace::regnamespace::text !~ '^pg_toast'
  UNION ALL
  SELECT format('idx %s', pg_get_indexdef(x.indexrelid)) FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
  WHERE c.relnamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace) AND c.relnamespace::regnamespace::text !~ '^pg_toast'
  UNION ALL
  SELECT format('con %s %s %s', k.conrelid::regclass, k.conname, pg_get_constraintdef(k.oid)) FROM pg_constraint k
  WHERE k.connamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
  UNION ALL
  SELECT format('trg %s', pg_get_triggerdef(g.oid)) FROM pg_trigger g WHERE NOT g.tgisinternal
  UNION ALL
  SELECT format('fn %s %s %s', p.oid::regprocedure, pg_get_userbyid(p.proowner), md5(coalesce(p.prosrc, ''))) FROM pg_proc p
  WHERE p.pronamespace NOT IN ('pg_catalog'::regnamespace, 'information_schema'::regnamespace)
  UNION ALL
  SELECT format('ext %s %s', extname, extversion) FROM pg_extension
) x(d)`
