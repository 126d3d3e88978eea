package readmodel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// A rebuild's write is PostgreSQL's work (COPY, and above all keeping indexes up to date), which one
// connection does on one core while the rebuild's own process waits. So the write loads staging
// tables instead — copies of the read-model tables made with CREATE TABLE … (LIKE … INCLUDING ALL
// EXCLUDING INDEXES) and given the guard's exclusion constraints while empty (planIndexes: every
// claim is checked as it loads) — from rebuildLoadConns connections at once, each committing on its
// own, and then builds their other indexes once each (indexStaging). Then one transaction moves the checkpoint, drops the (empty) read-model tables,
// renames the staging tables and their indexes to the names the migration gave the originals, and
// syncs the reconciliation items. Readers see the old tables until that commit and the new ones after
// it. A crash before it leaves the checkpoint at the start and staging tables nobody reads; the next
// rebuild drops them. Each rebuild names its staging tables with a random suffix, so a runner that
// lost its lock cannot swap in another runner's tables, and its commit fails on the checkpoint anyway.
//
// Anything the swap would not carry over (grants, views, triggers, foreign keys, policies,
// publications, inheritance, another owner) makes the final transaction copy the staging tables into
// the read-model tables instead.
//
// The same suffix names the rebuild's work tables (UNLOGGED: nothing survives a crash that the
// replay does not make again): the replayed events, each booking's key, the resource groups and the
// staged item changes (bulk.go).

// rebuildTables are the tables a rebuild's write replaces.
var rebuildTables = []string{"calendar_bookings", "calendar_slots", "payment_streams", "payment_stream_refs", "calendar_booking_refs"}

// rebuildLoadConns is the number of connections that load staging tables at once.
const rebuildLoadConns = 2

// workTables are the rebuild's own tables, created with the staging tables and dropped by the swap.
var workTables = map[string]string{
	"calendar_replay":     `stream_id text COLLATE "C", version bigint, event_id uuid, event_type text, data bytea, metadata bytea`,
	"calendar_keys":       `stream text COLLATE "C", booking text COLLATE "C", resource text COLLATE "C", lower timestamptz, upper timestamptz, rescheduled_from text COLLATE "C", computed boolean`,
	"calendar_rest":       `stream text COLLATE "C", grp integer, lower timestamptz, upper timestamptz, by text[]`,
	"calendar_undo":       `booking text COLLATE "C"`,
	"calendar_lone_slots": `LIKE calendar_slots`,
	"calendar_groups":     `resource text COLLATE "C", grp integer`,
	"calendar_item_opens": `kind text, subject text, booking text, other_booking text, event_id uuid, receipt_id bigint, reason text`,
	"calendar_item_texts": `id bigint, close boolean, text text`,
}

const stagingPattern = `^(calendar_bookings|calendar_slots|payment_streams|payment_stream_refs|calendar_booking_refs|calendar_replay|calendar_keys|calendar_groups|calendar_rest|calendar_undo|calendar_lone_slots|calendar_item_opens|calendar_item_texts)_rebuild_[0-9a-f]{16}$`

// swapBlockersSQL names the read-model tables that something else refers to, that carry settings
// CREATE TABLE … LIKE does not copy, that another role owns (it could not drop them, and the new
// tables would change owner), or that live outside the schema new tables are created in: their own
// indexes, constraints, defaults, row type and TOAST table are the only dependents a swap keeps.
const swapBlockersSQL = `SELECT c.relname FROM pg_class c
WHERE c.oid = ANY(ARRAY(SELECT t::regclass FROM unnest($1::text[]) AS t)) AND (
    c.relnamespace <> current_schema()::regnamespace OR c.relowner <> current_user::regrole
    OR coalesce(c.relacl <> acldefault('r', c.relowner), false) OR c.relrowsecurity OR c.relkind <> 'r' OR c.relispartition
    OR c.reloptions IS NOT NULL
    OR EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = c.oid)
    OR EXISTS (SELECT 1 FROM pg_depend d WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = c.oid AND NOT (
           (d.classid = 'pg_class'::regclass AND (d.objid = c.reltoastrelid
               OR EXISTS (SELECT 1 FROM pg_index x WHERE x.indexrelid = d.objid AND x.indrelid = c.oid)))
        OR d.classid = 'pg_type'::regclass
        OR d.classid = 'pg_attrdef'::regclass
        OR (d.classid = 'pg_constraint'::regclass AND EXISTS (
               SELECT 1 FROM pg_constraint k WHERE k.oid = d.objid AND k.conrelid = c.oid AND k.contype IN ('p', 'x', 'c'))))))`

// staging is one rebuild's set of staging and work tables.
type staging struct {
	suffix string
	// swappable says the staging tables can replace the originals; renames are the statements that
	// give their indexes the originals' names, after the originals are dropped and the staging tables
	// renamed.
	swappable bool
	renames   []string
	// indexes are the CREATE INDEX statements the loaded staging tables are given (indexStaging), and
	// attach the statements that make primary keys and unique constraints of them afterwards.
	indexes, attach []string
	// horizon is the guard's: the claims whose slot ended before it load unguarded (guard.go).
	horizon time.Time
}

func (s *staging) table(name string) string { return name + s.suffix }

// createStaging drops staging tables left by earlier rebuilds and creates this one's, without
// indexes: they are built once the tables are loaded (indexStaging).
func (m *ReadModel) createStaging(ctx context.Context) (*staging, error) {
	blockers, err := queryRows(ctx, m.pool, pgx.RowTo[string], swapBlockersSQL, rebuildTables)
	if err != nil {
		return nil, fmt.Errorf("check read-model tables: %w", err)
	}
	if err := dropStaging(ctx, m.pool, ""); err != nil {
		return nil, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("name staging tables: %w", err)
	}
	horizon, err := m.guardHorizon(ctx)
	if err != nil {
		return nil, err
	}
	s := &staging{suffix: "_rebuild_" + hex.EncodeToString(b[:]), swappable: len(blockers) == 0, horizon: horizon}
	var create strings.Builder
	// Autovacuum stays off the rebuild's tables until the swap: its ANALYZE of a freshly loaded table
	// holds the lock every ALTER TABLE and the swap wait for, until PostgreSQL cancels it a
	// deadlock_timeout (1 s) later. The rebuild analyzes what it reads; the swap turns it back on.
	for _, t := range rebuildTables {
		fmt.Fprintf(&create, "CREATE TABLE %s (LIKE %s INCLUDING ALL EXCLUDING INDEXES) WITH (autovacuum_enabled = false);\n", s.table(t), t)
	}
	for t, columns := range workTables {
		fmt.Fprintf(&create, "CREATE UNLOGGED TABLE %s (%s) WITH (autovacuum_enabled = false);\n", s.table(t), columns)
	}
	if _, err := m.pool.Exec(ctx, create.String()); err != nil {
		return nil, fmt.Errorf("create staging tables: %w", err)
	}
	exclusive, err := s.planIndexes(ctx, m.pool)
	if err == nil && len(exclusive) > 0 {
		_, err = m.pool.Exec(ctx, strings.Join(exclusive, ";\n"))
	}
	if err != nil {
		m.dropStagingQuietly(s)
		return nil, fmt.Errorf("create staging tables: %w", err)
	}
	return s, nil
}

// planIndexes reads the read-model tables' indexes into s and returns the statements of those that
// lock their table against every other build (an exclusion constraint, which only ALTER TABLE can
// add, or a deferrable constraint). These are made on the empty staging tables, before anything is
// loaded: the guard's eight parts would otherwise each scan the loaded table twice (build, then
// check) with every other index build on it waiting, while loaded they take only the rows their
// predicate keeps — on a log of years, the claims that can still clash (guard.go) — as the live
// projection's inserts do. The rest are built once the tables are loaded (indexStaging).
func (s *staging) planIndexes(ctx context.Context, q querier) ([]string, error) {
	var exclusive []string
	for _, t := range rebuildTables {
		builds, err := queryRows(ctx, q, pgx.RowToStructByPos[indexBuild], indexDefsSQL, t, s.table(t))
		if err != nil {
			return nil, fmt.Errorf("read the indexes of %s: %w", t, err)
		}
		for _, b := range builds {
			if b.Exclusive {
				exclusive = append(exclusive, b.Build)
			} else {
				s.indexes = append(s.indexes, b.Build)
			}
			if b.Attach != "" {
				s.attach = append(s.attach, b.Attach)
			}
			s.renames = append(s.renames, b.Rename)
		}
	}
	return exclusive, nil
}

// indexDefsSQL makes, for each index of table $1, the statement that builds it on the staging table
// $2 under a name of its own; the one that makes it its constraint afterwards, for a primary key or
// unique constraint (built as a unique index first, which shares the table's lock with the other
// index builds); whether the build locks the table against every other (an exclusion constraint,
// which only ALTER TABLE can add, or a deferrable one); and the statement that gives it the
// original's name once the original is dropped. Renaming an index renames its constraint.
const indexDefsSQL = `SELECT CASE WHEN k.oid IS NULL OR attach
        THEN format('CREATE %sINDEX %I ON %I%s', CASE WHEN x.indisunique THEN 'UNIQUE ' END, n, $2::text, substring(pg_get_indexdef(x.indexrelid) FROM ' USING .*$'))
        ELSE format('ALTER TABLE %I ADD CONSTRAINT %I %s', $2::text, n, pg_get_constraintdef(k.oid)) END,
    CASE WHEN attach
        THEN format('ALTER TABLE %I ADD CONSTRAINT %I %s USING INDEX %I', $2::text, n, CASE k.contype WHEN 'p' THEN 'PRIMARY KEY' ELSE 'UNIQUE' END, n)
        ELSE '' END,
    k.oid IS NOT NULL AND NOT attach,
    format('ALTER INDEX %I RENAME TO %I', n, i.relname)
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
LEFT JOIN pg_constraint k ON k.conindid = x.indexrelid AND k.conrelid = x.indrelid AND k.contype IN ('p', 'u', 'x')
CROSS JOIN LATERAL (SELECT $2::text || '_' || x.indexrelid, coalesce(k.contype IN ('p', 'u') AND NOT k.condeferrable, false)) AS name(n, attach)
WHERE x.indrelid = $1::regclass
ORDER BY x.indexrelid`

// indexBuild is one row of indexDefsSQL.
type indexBuild struct {
	Build, Attach string
	Exclusive     bool
	Rename        string
}

// indexStaging builds the loaded staging tables' indexes, the exclusive ones aside (planIndexes): one
// bulk build each costs a fraction of keeping them up to date row by row while the chunks load (the
// B-trees above all). The builds run on the loading connections as a queue, each index a job of its
// own, so that both connections work until the end (docs/benchmarks.md, "Rebuild at scale").
// Primary keys and unique constraints are attached to their indexes once all are built.
//
// A build gets no parallel workers (stagingBuildSettings): two builds at once already keep two cores
// busy, and workers of their own only added their coordination and merge to the same cores.
func (m *ReadModel) indexStaging(ctx context.Context, s *staging) error {
	ld := m.startLoad(ctx)
	for _, b := range s.indexes {
		ld.add(func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, stagingBuildSettings+b); err != nil {
				return fmt.Errorf("index the staging tables: %w", err)
			}
			return nil
		})
	}
	if err := ld.wait(); err != nil {
		return err
	}
	if len(s.attach) == 0 {
		return nil
	}
	if _, err := m.pool.Exec(ctx, strings.Join(s.attach, ";\n")); err != nil {
		return fmt.Errorf("attach the staging tables' keys: %w", err)
	}
	return nil
}

// stagingBuildSettings start each staging index build's transaction. Without parallel workers a
// 1,000,000-event rebuild's index phase took 4.1–5.0 s against 5.2–5.8 s with PostgreSQL's default
// two, and the cluster 35 against 38 CPU-s for the whole rebuild (ADR 0008's amendment of
// 2026-12-06, night).
const stagingBuildSettings = "SET LOCAL maintenance_work_mem = '256MB'; SET LOCAL max_parallel_maintenance_workers = 0;\n"

// dropStaging drops the staging tables whose suffix is suffix, or all of them when suffix is empty.
func dropStaging(ctx context.Context, q querier, suffix string) error {
	names, err := queryRows(ctx, q, pgx.RowTo[string], `SELECT relname FROM pg_class
WHERE relkind = 'r' AND relnamespace = current_schema()::regnamespace AND relname ~ $1 AND ($2 = '' OR right(relname, length($2)) = $2)`,
		stagingPattern, suffix)
	if err != nil {
		return fmt.Errorf("find staging tables: %w", err)
	}
	if len(names) == 0 {
		return nil
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = pgx.Identifier{n}.Sanitize()
	}
	if _, err := q.Exec(ctx, `DROP TABLE IF EXISTS `+strings.Join(quoted, ", ")); err != nil {
		return fmt.Errorf("drop staging tables: %w", err)
	}
	return nil
}

// dropStagingQuietly cleans up after a failed write; what it cannot drop, the next write does.
func (m *ReadModel) dropStagingQuietly(s *staging) {
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = dropStaging(ctx, m.pool, s.suffix)
}

// loadJob copies one part of the rebuilt read model into the staging tables.
type loadJob func(ctx context.Context, tx pgx.Tx) error

// loader runs load jobs on rebuildLoadConns connections as they are added, each job in its own
// transaction, so that the first parts load while the rest are computed.
type loader struct {
	next   chan loadJob
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup
	errs   []error
}

var errLoadAborted = errors.New("load of staging tables aborted")

// startLoad starts the connections that load; the caller ends with wait or abort.
func (m *ReadModel) startLoad(ctx context.Context) *loader {
	ctx, cancel := context.WithCancelCause(ctx)
	l := &loader{next: make(chan loadJob), cancel: cancel, errs: make([]error, rebuildLoadConns)}
	for w := range rebuildLoadConns {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			conn, err := m.pool.Acquire(ctx)
			if err != nil {
				l.errs[w] = fmt.Errorf("load staging tables: %w", err)
				cancel(l.errs[w])
			} else {
				defer conn.Release()
			}
			for j := range l.next {
				if ctx.Err() != nil {
					continue // failed or aborted: only drain, so that add never blocks
				}
				if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return j(ctx, tx) }); err != nil {
					l.errs[w] = err
					cancel(err)
				}
			}
		}()
	}
	return l
}

// add queues a job; it blocks until a connection takes it.
func (l *loader) add(j loadJob) { l.next <- j }

// wait returns once every job added has loaded, or the first failure.
func (l *loader) wait() error {
	close(l.next)
	l.wg.Wait()
	l.cancel(nil)
	return errors.Join(l.errs...)
}

// abort stops the load; the caller drops the staging tables.
func (l *loader) abort() {
	l.cancel(errLoadAborted)
	close(l.next)
	l.wg.Wait()
}

// install replaces the read-model tables with the staging tables — swapped in, or copied when they
// cannot be — and drops the work tables. tx has moved the checkpoint.
func (s *staging) install(ctx context.Context, tx pgx.Tx) error {
	var b strings.Builder
	if s.swappable {
		fmt.Fprintf(&b, "DROP TABLE %s;\n", strings.Join(rebuildTables, ", "))
		for _, t := range rebuildTables {
			fmt.Fprintf(&b, "ALTER TABLE %s RENAME TO %s;\n", s.table(t), t)
		}
		for _, r := range s.renames {
			b.WriteString(r + ";\n")
		}
		for _, t := range rebuildTables {
			fmt.Fprintf(&b, "ALTER TABLE %s RESET (autovacuum_enabled);\n", t)
		}
	} else {
		// Empty already (the reset did it in the transaction that moved the checkpoint to the
		// start); repeated so that the copy can never meet a row.
		fmt.Fprintf(&b, "TRUNCATE %s;\n", strings.Join(rebuildTables, ", "))
		for _, t := range rebuildTables {
			fmt.Fprintf(&b, "INSERT INTO %s SELECT * FROM %s;\nDROP TABLE %[2]s;\n", t, s.table(t))
		}
	}
	for t := range workTables {
		fmt.Fprintf(&b, "DROP TABLE %s;\n", s.table(t))
	}
	if _, err := tx.Exec(ctx, b.String()); err != nil {
		return fmt.Errorf("swap in the rebuilt tables: %w", err)
	}
	return nil
}
