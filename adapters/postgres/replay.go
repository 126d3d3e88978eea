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

// logRangeCountSQL counts the events after $1/$2 up to $3/$4. Every event at or before a position
// ReadAll returned is there for good (docs/adr/0002-global-order-on-postgres.md): its transaction and
// every older one have ended, and events are never changed or deleted, so the range is the same set
// whenever it is read and needs no snapshot of its own.
const logRangeCountSQL = `SELECT count(*) FROM events
WHERE (tx_id, global_position) > ($1::xid8, $2::bigint) AND (tx_id, global_position) <= ($3::xid8, $4::bigint)`

// LogRange finds the events ReadAll would return after from, as of now: how many they are and the
// position of the last (from when none). LogRelation reads them.
func (s *Store) LogRange(ctx context.Context, from eventlog.Position) (int64, eventlog.Position, error) {
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
	var n int64
	if err := s.pool.QueryRow(ctx, logRangeCountSQL, from.Commit, int64(from.Prepare), last.Commit, pos).Scan(&n); err != nil {
		return 0, from, fmt.Errorf("count the events after %s: %w", from, translate(err))
	}
	return n, last, nil
}

// LogRelation is a query of the events after from up to to (a range LogRange found), with the
// columns stream_id, version, event_id, event_type, data and metadata, for a statement of this
// store's database to read them where they lie: a replay of the whole log (the calendar's rebuild)
// reads the events table instead of a copy of it. The positions are numbers, written into the text.
func (s *Store) LogRelation(from, to eventlog.Position) string {
	return fmt.Sprintf(`SELECT stream_id, version, event_id, event_type, data, metadata FROM events
WHERE (tx_id, global_position) > ('%d'::xid8, %d) AND (tx_id, global_position) <= ('%d'::xid8, %d)`,
		from.Commit, from.Prepare, to.Commit, to.Prepare)
}
