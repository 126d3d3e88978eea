package readmodel

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// loadedTables are the tables a rebuild's flush empties and loads, in TRUNCATE's syntax.
const loadedTables = `calendar_bookings, calendar_slots, payment_streams, payment_stream_refs, calendar_booking_refs`

// indexDeferredTables are the loaded tables whose indexes are built after the load. calendar_slots
// keeps its indexes: the exclusion constraint probes its GiST once per row whether it checks during
// COPY or when it is added after the load (measured: about 0.6 s for 22,000 claims either way), and
// its guard then never leaves the table.
const indexDeferredTables = `calendar_bookings, payment_streams, payment_stream_refs, calendar_booking_refs`

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
// changing an index is restored as it then stands.
const tableIndexesSQL = `SELECT t.relname, i.relname, con.oid IS NOT NULL,
    CASE WHEN con.oid IS NULL THEN pg_get_indexdef(x.indexrelid) ELSE pg_get_constraintdef(con.oid) END
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
LEFT JOIN pg_constraint con ON con.conindid = x.indexrelid AND con.conrelid = x.indrelid AND con.contype IN ('p', 'u', 'x')
WHERE x.indrelid = ANY($1::text[]::regclass[])
ORDER BY t.relname, i.relname`

// dropIndexes drops every index and index-backed constraint (primary keys) of indexDeferredTables
// and returns their definitions for restoreIndexes: one bulk build after the load costs less than
// maintaining them row by row during COPY. The caller must hold the tables' ACCESS EXCLUSIVE lock (the
// TRUNCATE at the start of the same transaction) and call restoreIndexes before committing: no other
// session can read or write the tables meanwhile, DDL is transactional (a rollback or a crash brings
// the indexes back), and ADD PRIMARY KEY checks every loaded row, so nothing is committed unchecked.
func dropIndexes(ctx context.Context, tx pgx.Tx) ([]tableIndex, error) {
	rows, err := tx.Query(ctx, tableIndexesSQL, strings.Split(indexDeferredTables, ", "))
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

// restoreIndexes creates again what dropIndexes dropped; a primary key checks every row loaded since.
func restoreIndexes(ctx context.Context, tx pgx.Tx, indexes []tableIndex) error {
	for _, ix := range indexes {
		sql := ix.def
		if ix.constraint {
			sql = `ALTER TABLE ` + pgx.Identifier{ix.table}.Sanitize() + ` ADD CONSTRAINT ` + pgx.Identifier{ix.name}.Sanitize() + ` ` + ix.def
		}
		if _, err := tx.Exec(ctx, sql); err != nil {
			return fmt.Errorf("restore %s after the load: %w", ix.name, err)
		}
	}
	return nil
}
