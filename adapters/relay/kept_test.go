package relay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/jobs"
	"bookingledger/adapters/jobs/jobstest"
	"bookingledger/adapters/postgres/pgtest"
)

// keptDatabase is a database the package's tests take turns on (at most cap(envSlots) of them exist
// at once), with its pool. Creating and dropping a database per test, and opening every connection of
// it cold (a new backend, its catalog caches filled again, its statements planned again), was about a
// tenth of what the package cost the server: 467 connections a run, 180 with kept databases. Between
// two tests the database is emptied (every table that was empty when it was created is emptied again,
// every sequence starts over), so each test still starts on what a new database holds; the pool's
// connections stay, warm. A failed test's database is dropped, not trusted; a test that left a
// session's advisory lock behind (a projection runner that did not unlock) gives up the connections.
type keptDatabase struct {
	url  string
	pool *pgxpool.Pool
	drop func() error
	// empty empties the database; seeded counts the rows of the tables that had rows when it was
	// created (the migrations' own bookkeeping), which a test must leave as they are.
	empty, seeded string
	rows          string
}

var kept struct {
	mu   sync.Mutex
	free []*keptDatabase
	all  []*keptDatabase
}

// envConns bounds an env's pool, as pgtest.Open bounds a test database's.
const envConns = 12

// takeDatabase returns a kept database no other test uses, creating one when every one is in use.
func takeDatabase(t testing.TB) *keptDatabase {
	t.Helper()
	kept.mu.Lock()
	if n := len(kept.free); n > 0 {
		db := kept.free[n-1]
		kept.free = kept.free[:n-1]
		kept.mu.Unlock()
		return db
	}
	kept.mu.Unlock()
	url, drop := pgtest.NewKeptDatabaseURL(t, jobstest.Template)
	db := &keptDatabase{url: url, drop: drop}
	kept.mu.Lock()
	kept.all = append(kept.all, db)
	kept.mu.Unlock()
	pool, err := newPool(url)
	require.NoError(t, err)
	db.pool = pool
	ctx := context.Background()
	_, err = jobs.Migrate(ctx, db.pool, nil) // a no-op unless River's migrations changed since the template
	require.NoError(t, err)
	require.NoError(t, db.survey(ctx))
	return db
}

func newPool(url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = envConns
	return pgxpool.NewWithConfig(context.Background(), cfg)
}

// survey builds the statements that empty the new database and check its seeded tables.
func (db *keptDatabase) survey(ctx context.Context) error {
	rows, err := db.pool.Query(ctx, `SELECT format('%I.%I', schemaname, tablename) FROM pg_tables
WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1`)
	if err != nil {
		return err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	var empty, seeded []string
	for _, tbl := range tables {
		var has bool
		if err := db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+tbl+`)`).Scan(&has); err != nil {
			return err
		}
		if has {
			seeded = append(seeded, `(SELECT count(*) FROM `+tbl+`)`)
		} else {
			empty = append(empty, tbl)
		}
	}
	if len(empty) == 0 || len(seeded) == 0 {
		return fmt.Errorf("kept database: %d empty and %d seeded tables", len(empty), len(seeded))
	}
	// DELETE, not TRUNCATE: the tables hold a test's few hundred rows at most, and TRUNCATE's new
	// files for every table and index cost the server 80 ms a time, DELETE 5 ms.
	db.empty = `BEGIN; SET LOCAL lock_timeout = '10s'; DELETE FROM ` + strings.Join(empty, "; DELETE FROM ") + `;
SELECT setval(s.seqrelid, s.seqstart, false) FROM pg_sequence s; COMMIT`
	db.seeded = `SELECT concat_ws(' ', ` + strings.Join(seeded, ", ") + `)`
	return db.pool.QueryRow(ctx, db.seeded).Scan(&db.rows)
}

// giveBack empties the database for the next test, once the test's relays and stores stopped. A
// failed test's database is dropped rather than trusted.
func (db *keptDatabase) giveBack(t testing.TB) {
	if t.Failed() {
		db.discard()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := db.reset(ctx); err != nil {
		t.Errorf("empty the test database for the next test: %v", err)
		db.discard()
		return
	}
	kept.mu.Lock()
	kept.free = append(kept.free, db)
	kept.mu.Unlock()
}

func (db *keptDatabase) reset(ctx context.Context) error {
	var locks int
	if err := db.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks
WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&locks); err != nil {
		return err
	}
	if locks > 0 {
		// A session lock the test left: its connections go, and the lock with them.
		db.pool.Close()
		pool, err := newPool(db.url)
		if err != nil {
			return err
		}
		db.pool = pool
	}
	if _, err := db.pool.Exec(ctx, db.empty); err != nil {
		return err
	}
	var rows string
	if err := db.pool.QueryRow(ctx, db.seeded).Scan(&rows); err != nil {
		return err
	}
	if rows != db.rows {
		return fmt.Errorf("the migrations' tables hold %s rows, not %s", rows, db.rows)
	}
	return nil
}

func (db *keptDatabase) discard() {
	db.pool.Close()
	kept.mu.Lock()
	defer kept.mu.Unlock()
	for i, d := range kept.all {
		if d == db {
			kept.all = append(kept.all[:i], kept.all[i+1:]...)
			break
		}
	}
	_ = db.drop()
}

// dropKeptDatabases drops the kept databases once every test ended.
func dropKeptDatabases() error {
	kept.mu.Lock()
	defer kept.mu.Unlock()
	var errs []error
	for _, db := range kept.all {
		if db.pool != nil {
			db.pool.Close()
		}
		errs = append(errs, db.drop())
	}
	kept.all, kept.free = nil, nil
	return errors.Join(errs...)
}
