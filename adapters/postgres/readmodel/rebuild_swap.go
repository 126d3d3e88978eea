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

// A rebuild's write is PostgreSQL's work (COPY, and above all the exclusion constraint's check of
// every claim), which one connection does on one core while the rebuild's own process waits. So the
// write loads staging tables instead — copies of the read-model tables made with CREATE TABLE … (LIKE …
// INCLUDING ALL), which keeps the exclusion constraint — from rebuildLoadConns connections at once,
// each committing on its own (the chunks of a rebuild never share a connected set of claims, so two
// loads never check against each other's rows). Then one transaction moves the checkpoint, drops the
// (empty) read-model tables, renames the staging tables, their indexes and constraints to the names
// the migration gave the originals, and syncs the reconciliation items. Readers see the old tables
// until that commit and the new ones after it. A crash before it leaves the checkpoint at the start
// and staging tables nobody reads; the next rebuild drops them. Each rebuild names its staging tables
// with a random suffix, so a runner that lost its lock cannot swap in another runner's tables, and its
// commit fails on the checkpoint anyway.
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
	"calendar_keys":       `stream text COLLATE "C", booking text COLLATE "C", resource text COLLATE "C", lower timestamptz, upper timestamptz, rescheduled_from text COLLATE "C"`,
	"calendar_groups":     `resource text COLLATE "C", grp integer`,
	"calendar_item_opens": `kind text, subject text, booking text, other_booking text, event_id uuid, receipt_id bigint, reason text`,
	"calendar_item_texts": `id bigint, close boolean, text text`,
}

const stagingPattern = `^(calendar_bookings|calendar_slots|payment_streams|payment_stream_refs|calendar_booking_refs|calendar_replay|calendar_keys|calendar_groups|calendar_item_opens|calendar_item_texts)_rebuild_[0-9a-f]{16}$`

// swapBlockersSQL names the read-model tables that something else refers to, that carry settings
// CREATE TABLE … LIKE does not copy, that another role owns (it could not drop them, and the new
// tables would change owner), or that live outside the schema new tables are created in: their own
// indexes, constraints, defaults, row type and TOAST table are the only dependents a swap keeps.
const swapBlockersSQL = `SELECT c.relname FROM pg_class c
WHERE c.oid = ANY(ARRAY(SELECT t::regclass FROM unnest($1::text[]) AS t)) AND (
    c.relnamespace <> current_schema()::regnamespace OR c.relowner <> current_user::regrole
    OR coalesce(c.relacl <> acldefault('r', c.relowner), false) OR c.relrowsecurity OR c.relkind <> 'r' OR c.relispartition
    OR EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = c.oid)
    OR EXISTS (SELECT 1 FROM pg_depend d WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = c.oid AND NOT (
           (d.classid = 'pg_class'::regclass AND (d.objid = c.reltoastrelid
               OR EXISTS (SELECT 1 FROM pg_index x WHERE x.indexrelid = d.objid AND x.indrelid = c.oid)))
        OR d.classid = 'pg_type'::regclass
        OR d.classid = 'pg_attrdef'::regclass
        OR (d.classid = 'pg_constraint'::regclass AND EXISTS (
               SELECT 1 FROM pg_constraint k WHERE k.oid = d.objid AND k.conrelid = c.oid AND k.contype IN ('p', 'x', 'c'))))))`

// namedPartsSQL lists a table's indexes and check constraints by shape (their definition without
// names), to pair the staging table's parts with the original's.
const namedPartsSQL = `SELECT 'index', i.relname,
    format('%s %s %s %s', x.indisunique, x.indisprimary, x.indisexclusion, substring(pg_get_indexdef(x.indexrelid) FROM ' USING .*$'))
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = $1::regclass
UNION ALL
SELECT 'check', k.conname, pg_get_constraintdef(k.oid) FROM pg_constraint k WHERE k.conrelid = $1::regclass AND k.contype = 'c'`

// staging is one rebuild's set of staging and work tables.
type staging struct {
	suffix string
	// swappable says the staging tables can replace the originals; renames are then the statements
	// that give their parts the originals' names, after the originals are dropped and the staging
	// tables renamed.
	swappable bool
	renames   []string
}

func (s *staging) table(name string) string { return name + s.suffix }

// createStaging drops staging tables left by earlier rebuilds, creates this one's, and pairs their
// parts with the originals' when the originals can be swapped.
func (m *ReadModel) createStaging(ctx context.Context) (*staging, error) {
	blockers, err := collectStrings(ctx, m.pool, swapBlockersSQL, rebuildTables)
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
	s := &staging{suffix: "_rebuild_" + hex.EncodeToString(b[:]), swappable: len(blockers) == 0}
	var create strings.Builder
	for _, t := range rebuildTables {
		fmt.Fprintf(&create, "CREATE TABLE %s (LIKE %s INCLUDING ALL);\n", s.table(t), t)
	}
	for t, columns := range workTables {
		fmt.Fprintf(&create, "CREATE UNLOGGED TABLE %s (%s);\n", s.table(t), columns)
	}
	if _, err := m.pool.Exec(ctx, create.String()); err != nil {
		return nil, fmt.Errorf("create staging tables: %w", err)
	}
	for _, t := range rebuildTables {
		if !s.swappable {
			break
		}
		renames, ok, err := pairParts(ctx, m.pool, t, s.table(t))
		if err != nil {
			m.dropStagingQuietly(s)
			return nil, err
		}
		s.renames, s.swappable = append(s.renames, renames...), ok
	}
	return s, nil
}

// pairParts returns the renames that give staged's indexes and check constraints the names of
// original's; ok is false when the two do not pair one to one.
func pairParts(ctx context.Context, q querier, original, staged string) (renames []string, ok bool, err error) {
	parts := func(table string) (map[string]string, bool, error) {
		rows, err := q.Query(ctx, namedPartsSQL, table)
		if err != nil {
			return nil, false, fmt.Errorf("parts of %s: %w", table, err)
		}
		defer rows.Close()
		out := map[string]string{}
		for rows.Next() {
			var kind, name, shape string
			if err := rows.Scan(&kind, &name, &shape); err != nil {
				return nil, false, fmt.Errorf("parts of %s: %w", table, err)
			}
			key := kind + " " + shape
			if _, dup := out[key]; dup {
				return nil, false, rows.Err()
			}
			out[key] = name
		}
		return out, true, rows.Err()
	}
	want, ok, err := parts(original)
	if err != nil || !ok {
		return nil, false, err
	}
	have, ok, err := parts(staged)
	if err != nil || !ok || len(have) != len(want) {
		return nil, false, err
	}
	for key, to := range want {
		from, found := have[key]
		if !found {
			return nil, false, nil
		}
		if from == to {
			continue
		}
		if strings.HasPrefix(key, "index ") {
			renames = append(renames, fmt.Sprintf("ALTER INDEX %s RENAME TO %s", pgx.Identifier{from}.Sanitize(), pgx.Identifier{to}.Sanitize()))
		} else {
			renames = append(renames, fmt.Sprintf("ALTER TABLE %s RENAME CONSTRAINT %s TO %s",
				pgx.Identifier{original}.Sanitize(), pgx.Identifier{from}.Sanitize(), pgx.Identifier{to}.Sanitize()))
		}
	}
	return renames, true, nil
}

// dropStaging drops the staging tables whose suffix is suffix, or all of them when suffix is empty.
func dropStaging(ctx context.Context, q querier, suffix string) error {
	names, err := collectStrings(ctx, q, `SELECT relname FROM pg_class
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
type loadJob func(ctx context.Context, c copier) error

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
