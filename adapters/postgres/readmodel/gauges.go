package readmodel

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"bookingledger/projections"
)

// OpenItemCounts returns how many reconciliation items OpenItems would list, by kind; every kind is
// present. Unlike OpenItems it writes nothing (it runs at every metrics scrape of every instance): a
// quarantined receipt that has no item yet counts as the open item it will get.
func (m *ReadModel) OpenItemCounts(ctx context.Context) (map[projections.ItemKind]int64, error) {
	out := map[projections.ItemKind]int64{projections.ItemConflict: 0, projections.ItemQuarantined: 0, projections.ItemLateEvent: 0, projections.ItemStep: 0}
	rows, err := m.pool.Query(ctx, `SELECT kind, count(*) FROM reconciliation_items WHERE closed_at IS NULL GROUP BY kind
UNION ALL
SELECT 'quarantined', count(*)`+unitemizedQuarantineSQL)
	if err != nil {
		return nil, fmt.Errorf("count open reconciliation items: %w", err)
	}
	var (
		kind string
		n    int64
	)
	_, err = pgx.ForEachRow(rows, []any{&kind, &n}, func() error {
		out[projections.ItemKind(kind)] += n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count open reconciliation items: %w", err)
	}
	return out, nil
}
