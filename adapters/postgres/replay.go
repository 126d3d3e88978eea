package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"bookingledger/domain/eventlog"
)

// lastEventSQL is the position of the last event ReadAll($1/$2, …) would return now.
const lastEventSQL = `SELECT tx_id, global_position FROM events
WHERE ` + readableAfter + `
ORDER BY tx_id DESC, global_position DESC
LIMIT 1`

// copyEventsSQL copies the events after $1/$2 up to $3/$4 into table %s. Every event at or before a
// position ReadAll returned is there for good (docs/adr/0002-global-order-on-postgres.md): its
// transaction and every older one have ended, so the range needs no snapshot of its own.
const copyEventsSQL = `INSERT INTO %s (stream_id, version, event_id, event_type, data, metadata)
SELECT stream_id, version, event_id, event_type, data, metadata FROM events
WHERE (tx_id, global_position) > ($1::xid8, $2::bigint) AND (tx_id, global_position) <= ($3::xid8, $4::bigint)`

// CopyEvents copies every event ReadAll would return after from, as of now, into table: a table of
// this store's database with the columns stream_id, version, event_id, event_type, data and
// metadata. The events never leave the database: a replay of the whole log (the calendar's rebuild)
// costs one statement instead of reading every event out and copying it back. It returns how many
// events it copied and the position of the last (from when none).
func (s *Store) CopyEvents(ctx context.Context, table string, from eventlog.Position) (int64, eventlog.Position, error) {
	var (
		last eventlog.Position
		pos  int64
	)
	err := s.pool.QueryRow(ctx, lastEventSQL, from.Commit, int64(from.Prepare)).Scan(&last.Commit, &pos)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, from, nil
	}
	if err != nil {
		return 0, from, fmt.Errorf("find the last event after %s: %w", from, translate(err))
	}
	last.Prepare = uint64(pos)
	tag, err := s.pool.Exec(ctx, fmt.Sprintf(copyEventsSQL, pgx.Identifier{table}.Sanitize()), from.Commit, int64(from.Prepare), last.Commit, pos)
	if err != nil {
		return 0, from, fmt.Errorf("copy the events after %s into %s: %w", from, table, translate(err))
	}
	return tag.RowsAffected(), last, nil
}
