package postgres

import (
	"context"
	"fmt"

	"bookingledger/domain/eventlog"
)

// EventsAfter counts the events of the global log after pos that a reader can already see (the
// horizon of ReadAll), up to limit: how far a projection whose checkpoint is pos is behind (the limit
// bounds the index scan of a reader that is far behind), or how many a rebuild will replay
// (projections.Counter).
func (s *Store) EventsAfter(ctx context.Context, pos eventlog.Position, limit int64) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM events WHERE `+readableAfter+` LIMIT $3) behind`,
		pos.Commit, int64(pos.Prepare), limit).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count events after %s: %w", pos, translate(err))
	}
	return n, nil
}

// CountQuarantined returns how many receipts are quarantined: an index-only count of the partial
// index that holds only those (migration 0190). The outcome is written into the statement, not
// passed: a generic plan with a parameter for it could not use a partial index.
func (s *Store) CountQuarantined(ctx context.Context) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, countQuarantinedSQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("count quarantined receipts: %w", translate(err))
	}
	return n, nil
}

const countQuarantinedSQL = `SELECT count(*) FROM receipts WHERE outcome = 'quarantined'`
