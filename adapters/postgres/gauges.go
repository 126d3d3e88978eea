package postgres

import (
	"context"
	"fmt"

	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

// EventsAfter counts the events of the global log after pos that a reader can already see (the
// horizon of ReadAll), up to limit: how far a projection whose checkpoint is pos is behind. The limit
// bounds the index scan of a reader that is far behind.
func (s *Store) EventsAfter(ctx context.Context, pos eventlog.Position, limit int64) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM (
    SELECT 1 FROM events
    WHERE (tx_id, global_position) > ($1::xid8, $2::bigint)
      AND tx_id < pg_snapshot_xmin(pg_current_snapshot())
    LIMIT $3) behind`, pos.Commit, int64(pos.Prepare), limit).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count events after %s: %w", pos, translate(err))
	}
	return n, nil
}

// CountReceipts returns how many receipts have the outcome (the index on (outcome, received_at)
// makes it an index-only count).
func (s *Store) CountReceipts(ctx context.Context, outcome ledger.Outcome) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM receipts WHERE outcome = $1`, string(outcome)).Scan(&n); err != nil {
		return 0, fmt.Errorf("count %s receipts: %w", outcome, translate(err))
	}
	return n, nil
}
