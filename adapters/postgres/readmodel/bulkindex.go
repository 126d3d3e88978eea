package readmodel

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// loadedTables are the tables a rebuild's flush empties and loads, in TRUNCATE's syntax.
const loadedTables = `calendar_bookings, calendar_slots, payment_streams, payment_stream_refs, calendar_booking_refs`

// tableIndex is one index of a loaded table as the catalog defines it: a plain index (def is its
// CREATE INDEX statement) or the index of a primary-key, unique or exclusion constraint (def is the
// constraint's definition).
type tableIndex struct {
	table      string
	name       string
	constraint bool
	def        string
}

// The definitions come from the catalog rather than from a copy in Go, so that a later migration
// changing an index or the guard is restored as it then stands.
const tableIndexesSQL = `SELECT t.relname, i.relname, con.oid IS NOT NULL,
    CASE WHEN con.oid IS NULL THEN pg_get_indexdef(x.indexrelid) ELSE pg_get_constraintdef(con.oid) END
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
LEFT JOIN pg_constraint con ON con.conindid = x.indexrelid AND con.conrelid = x.indrelid AND con.contype IN ('p', 'u', 'x')
WHERE x.indrelid = ANY($1::text[]::regclass[])
ORDER BY t.relname, i.relname`

// dropIndexes drops every index and index-backed constraint of the loaded tables, among them
// calendar_slots_no_double_booking, and returns their definitions for restoreIndexes. Maintaining them
// row by row during COPY costs several times what building them once after the load does.
//
// This does not weaken the double-booking guard, because the caller must already hold the tables'
// ACCESS EXCLUSIVE lock (the TRUNCATE at the start of the same transaction) and call restoreIndexes
// before committing:
//   - no other session can read or write the tables until the transaction ends: every statement on
//     them waits for the lock, and the catalog other sessions see is the committed one, with the
//     constraint;
//   - DDL is transactional: a rollback or a crash brings back the constraint and the rows it guarded;
//   - ADD CONSTRAINT ... EXCLUDE checks every loaded row against every other before it returns, so
//     the transaction can only commit with overlap-free holders and with the constraint in place for
//     every later write. An overlap fails the flush as COPY would have.
func dropIndexes(ctx context.Context, tx pgx.Tx) ([]tableIndex, error) {
	rows, err := tx.Query(ctx, tableIndexesSQL, strings.Split(loadedTables, ", "))
	if err != nil {
		return nil, fmt.Errorf("read index definitions: %w", err)
	}
	var out []tableIndex
	for rows.Next() {
		var ix tableIndex
		if err := rows.Scan(&ix.table, &ix.name, &ix.constraint, &ix.def); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read index definitions: %w", err)
		}
		out = append(out, ix)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read index definitions: %w", err)
	}
	for _, ix := range out {
		sql := `DROP INDEX ` + pgx.Identifier{ix.name}.Sanitize()
		if ix.constraint {
			sql = `ALTER TABLE ` + pgx.Identifier{ix.table}.Sanitize() + ` DROP CONSTRAINT ` + pgx.Identifier{ix.name}.Sanitize()
		}
		if _, err := tx.Exec(ctx, sql); err != nil {
			return nil, fmt.Errorf("drop %s for the load: %w", ix.name, err)
		}
	}
	return out, nil
}

// restoreIndexes creates again what dropIndexes dropped; constraints check every row loaded since.
func restoreIndexes(ctx context.Context, tx pgx.Tx, indexes []tableIndex) error {
	for _, ix := range indexes {
		sql := ix.def
		if ix.constraint {
			sql = `ALTER TABLE ` + pgx.Identifier{ix.table}.Sanitize() + ` ADD CONSTRAINT ` + pgx.Identifier{ix.name}.Sanitize() + ` ` + ix.def
		}
		if _, err := tx.Exec(ctx, sql); err != nil {
			var pgErr interface{ SQLState() string }
			if errors.As(err, &pgErr) && pgErr.SQLState() == "23P01" {
				return fmt.Errorf("restore %s: the slot-holder rule produced overlapping holders (a bug): %w", ix.name, err)
			}
			return fmt.Errorf("restore %s after the load: %w", ix.name, err)
		}
	}
	return nil
}
