package pgtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Spares hands a test package's tests migrated databases it empties and reuses, with their pools'
// connections, instead of a new database per test. A fresh database costs the server a CREATE
// DATABASE and a DROP DATABASE (each with a checkpoint) and a new backend for every connection its
// pool opens; emptying one costs a TRUNCATE of the tables that hold rows. A database goes back only
// when its test passed, nothing else is connected to it or holds an advisory lock in it, and its
// schema (tables, columns, indexes, constraints, owners, grants, functions) is the template's, as
// the catalog fingerprint shows; any other database is dropped. Close drops them all (TestMain).
type Spares struct {
	mu          sync.Mutex
	free        []*spare
	all         []*spare
	fingerprint string // of a fresh database, once one was made
}

type spare struct {
	name, url string
	pool      *pgxpool.Pool
}

// Database returns a pool on an empty migrated database for tb: a spare one when there is one, else
// a new one. The pool is not tb's to close.
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
	tmpl := migratedTemplate(tb, base, Extra{})
	name := randomName(tb, "bl_test_")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := adminExec(ctx, base, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tmpl}.Sanitize()+" STRATEGY FILE_COPY"); err != nil {
		tb.Fatalf("pgtest: create test database: %v", err)
	}
	u, err := withDatabase(base, name)
	if err != nil {
		tb.Fatalf("pgtest: %s: %v", EnvURL, err)
	}
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		tb.Fatalf("pgtest: parse database URL: %v", err)
	}
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("pgtest: open pool: %v", err)
	}
	sp := &spare{name: name, url: u, pool: pool}
	s.mu.Lock()
	s.all = append(s.all, sp)
	need := s.fingerprint == ""
	s.mu.Unlock()
	if need {
		fp, err := fingerprint(ctx, pool)
		if err != nil {
			tb.Fatalf("pgtest: fingerprint of a fresh database: %v", err)
		}
		s.mu.Lock()
		s.fingerprint = fp
		s.mu.Unlock()
	}
	return sp
}

// giveBack empties sp for the next test, or drops it when it cannot be trusted to equal a fresh one.
func (s *Spares) giveBack(tb testing.TB, sp *spare) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := fmt.Errorf("the test failed")
	if !tb.Failed() {
		s.mu.Lock()
		want := s.fingerprint
		s.mu.Unlock()
		err = reset(ctx, sp.pool, want)
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
	if dropErr := s.drop(ctx, sp); dropErr != nil {
		tb.Errorf("pgtest: drop test database %s: %v", sp.name, dropErr)
	}
}

func (s *Spares) drop(ctx context.Context, sp *spare) error {
	sp.pool.Close()
	base := os.Getenv(EnvURL)
	if base == "" {
		return nil
	}
	return adminExec(ctx, base, "DROP DATABASE IF EXISTS "+pgx.Identifier{sp.name}.Sanitize()+" WITH (FORCE)")
}

// Close drops every database, spare or still in use.
func (s *Spares) Close() {
	s.mu.Lock()
	all := s.all
	s.all, s.free = nil, nil
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, sp := range all {
		_ = s.drop(ctx, sp)
	}
}

// reset empties the database of pool when nothing but pool's idle connections is in it and its schema
// has the fingerprint want: every table that holds a row is truncated, every sequence set back to
// its start.
func reset(ctx context.Context, pool *pgxpool.Pool, want string) error {
	if n := pool.Stat().AcquiredConns(); n > 0 {
		return fmt.Errorf("%d connections still in use", n)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	var others, locks int
	if err := conn.QueryRow(ctx, `SELECT
  (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()),
  (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))`).
		Scan(&others, &locks); err != nil {
		return err
	}
	if total := int(pool.Stat().TotalConns()); others > total || locks > 0 {
		return fmt.Errorf("%d sessions (the pool has %d), %d advisory locks", others, total, locks)
	}
	fp, err := fingerprint(ctx, conn)
	if err != nil {
		return err
	}
	if fp != want {
		return fmt.Errorf("the schema differs from a fresh database's")
	}
	var truncate string
	if err := conn.QueryRow(ctx, nonEmptyTablesSQL).Scan(&truncate); err != nil {
		return err
	}
	if truncate != "" {
		var tables string
		if err := conn.QueryRow(ctx, truncate).Scan(&tables); err != nil {
			return err
		}
		if tables != "" {
			if _, err := conn.Exec(ctx, "TRUNCATE "+tables+" CASCADE"); err != nil {
				return err
			}
		}
	}
	_, err = conn.Exec(ctx, `SELECT setval(format('%I.%I', schemaname, sequencename)::regclass, start_value, false)
FROM pg_sequences WHERE schemaname = 'public' AND last_value IS NOT NULL`)
	return err
}

// nonEmptyTablesSQL builds the query that lists, comma-separated, the public tables (goose's own
// version table aside) holding at least one row.
const nonEmptyTablesSQL = `SELECT coalesce('SELECT coalesce(string_agg(t, '', ''), '''') FROM (' ||
  string_agg(format('SELECT %L AS t WHERE EXISTS (SELECT FROM %I)', quote_ident(relname), relname), ' UNION ALL ') || ') x', '')
FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p') AND relname <> 'goose_db_version'`

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// fingerprint is a digest of the database's own schema objects, by name and definition.
func fingerprint(ctx context.Context, q querier) (string, error) {
	var fp string
	err := q.QueryRow(ctx, `SELECT md5(string_agg(d, E'\n' ORDER BY d)) FROM (
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
) x(d)`).Scan(&fp)
	return fp, err
}
