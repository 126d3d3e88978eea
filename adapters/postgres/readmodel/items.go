package readmodel

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"bookingledger/domain/eventlog"
	"bookingledger/projections/calendar"
)

// existingItemsSQL returns the items that matter for a sync of the whole calendar: open ones and
// those an operator closed (never reopened).
const existingItemsSQL = `SELECT ` + itemColumns + ` FROM reconciliation_items
WHERE (closed_at IS NULL OR closed_by = 'operator') AND kind IN ('conflict', 'late_event')`

// scopedItemsSQL is existingItemsSQL for conflicts with a booking of $1 on either side and late events
// of a booking of $2. It runs in every incremental batch and must cost in proportion to the batch:
// pgx prepares statements, and a generic plan cannot use an index behind "$1 OR …", so each key is
// named directly (TestScopedQueriesStayIndexed checks the generic plans).
const scopedItemsSQL = `SELECT ` + itemColumns + ` FROM reconciliation_items
WHERE (closed_at IS NULL OR closed_by = 'operator')
  AND ((kind = 'conflict' AND booking = ANY($1))
    OR (kind = 'conflict' AND other_booking = ANY($1) AND other_booking <> '')
    OR (kind = 'late_event' AND booking = ANY($2)))`

// itemWrites queues the statements of ch. An item an operator closed meanwhile is left as it is. The
// update names the ids twice: "= ANY" gives a generic plan the primary key to look them up by.
func (b *batchTx) itemWrites(ch calendar.ItemChanges) {
	if len(ch.Open) > 0 {
		b.exec(fmt.Sprintf("open %d reconciliation items", len(ch.Open)), insertItemsSQL, itemArgs(ch.Open)...)
	}
	if len(ch.Refresh)+len(ch.Close) > 0 {
		b.exec("refresh and close items", fmt.Sprintf(itemTextsSQL, unnestTextsSQL)+` AND i.id = ANY($1)`, textArgs(ch)...)
	}
}

// itemTextsSQL gives the open items of %s (id, close, text) a new reason, or closes them with a note.
// Its test for an open item is written "IS TRUE" so that no plan can walk the partial index of open
// items instead (planned on an empty table, one did).
const itemTextsSQL = `UPDATE reconciliation_items i SET reason = CASE WHEN u.close THEN i.reason ELSE u.text END,
    closed_at = CASE WHEN u.close THEN now() END, closed_by = CASE WHEN u.close THEN 'auto' END,
    note = CASE WHEN u.close THEN u.text ELSE i.note END
FROM %s AS u(id, close, text) WHERE i.id = u.id AND (i.closed_at IS NULL) IS TRUE`

const unnestTextsSQL = `unnest($1::bigint[], $2::boolean[], $3::text[])`

// textArgs are the columns (id, close, text) of ch's new reasons and closing notes.
func textArgs(ch calendar.ItemChanges) []any {
	texts := slices.Concat(ch.Refresh, ch.Close)
	ids, closes, out := make([]int64, len(texts)), make([]bool, len(texts)), make([]string, len(texts))
	for i, t := range texts {
		ids[i], closes[i], out[i] = t.ID, i >= len(ch.Refresh), t.Text
	}
	return []any{ids, closes, out}
}

// insertItemsSQL opens the items of itemArgs; a zero event id or receipt id is none.
const insertItemsSQL = `INSERT INTO reconciliation_items` + unnestItemsSQL + `ON CONFLICT (kind, subject) WHERE closed_at IS NULL DO NOTHING`

const unnestItemsSQL = ` (kind, subject, booking, other_booking, event_id, receipt_id, reason)
SELECT k, s, b, o, nullif(e, '00000000-0000-0000-0000-000000000000'), nullif(r, 0), reason
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::uuid[], $6::bigint[], $7::text[]) AS u(k, s, b, o, e, r, reason)
`

// itemArgs are insertItemsSQL's arguments for items, sorted by kind and subject as the rebuild opens them.
func itemArgs(items []calendar.DesiredItem) []any {
	slices.SortFunc(items, func(a, b calendar.DesiredItem) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Subject, b.Subject))
	})
	n := len(items)
	kinds, subjects, bs, others, reasons := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	events, receipts := make([][16]byte, n), make([]int64, n)
	for i, d := range items {
		kinds[i], subjects[i], bs[i], others[i], reasons[i] = string(d.Kind), d.Subject, string(d.Booking), string(d.OtherBooking), d.Reason
		events[i], receipts[i] = [16]byte(d.EventID), d.ReceiptID
	}
	return []any{kinds, subjects, bs, others, events, receipts, reasons}
}

// itemizedReceiptsSQL lists the receipts that have a quarantine item, open or closed (the receipts
// themselves are adapters/postgres's: ReceiptSource).
const itemizedReceiptsSQL = `SELECT receipt_id FROM reconciliation_items WHERE kind = 'quarantined' AND receipt_id IS NOT NULL`

// OpenItemCounts returns how many reconciliation items OpenItems would list, by kind; every kind is
// present. Unlike OpenItems it writes nothing (it runs at every metrics scrape of every instance): a
// quarantined receipt that has no item yet counts as the open item it will get. It reads one snapshot,
// so that a receipt given its item meanwhile is not counted twice.
func (m *ReadModel) OpenItemCounts(ctx context.Context) (map[calendar.ItemKind]int64, error) {
	out := map[calendar.ItemKind]int64{calendar.ItemConflict: 0, calendar.ItemQuarantined: 0, calendar.ItemLateEvent: 0, calendar.ItemStep: 0, calendar.ItemSync: 0}
	err := pgx.BeginTxFunc(ctx, m.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		counts, err := queryRows(ctx, tx, pgx.RowToStructByPos[struct {
			Kind calendar.ItemKind
			N    int64
		}], `SELECT kind, count(*) FROM reconciliation_items WHERE closed_at IS NULL GROUP BY kind`)
		if err != nil {
			return err
		}
		for _, c := range counts {
			out[c.Kind] += c.N
		}
		itemized, err := queryRows(ctx, tx, pgx.RowTo[int64], itemizedReceiptsSQL)
		if err != nil {
			return err
		}
		n, err := m.opts.Receipts.CountQuarantinedExcept(ctx, tx, itemized)
		out[calendar.ItemQuarantined] += n
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("count open reconciliation items: %w", err)
	}
	return out, nil
}

// syncQuarantine opens an item for every quarantined receipt that never had one. Receipts are not
// events, so this runs when the runner is caught up and before the queue is listed; it is idempotent.
func (m *ReadModel) syncQuarantine(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, m.pool, func(tx pgx.Tx) error {
		itemized, err := queryRows(ctx, tx, pgx.RowTo[int64], itemizedReceiptsSQL)
		if err != nil {
			return err
		}
		rs, err := m.opts.Receipts.QuarantinedReceipts(ctx, tx, itemized)
		if err != nil || len(rs) == 0 {
			return err
		}
		items := make([]calendar.DesiredItem, len(rs))
		for i, r := range rs {
			items[i] = calendar.QuarantineItem(r.ID, r.Provider, r.DeliveryID, r.Reason, r.Booking)
		}
		if _, err := tx.Exec(ctx, insertItemsSQL, itemArgs(items)...); err != nil {
			return fmt.Errorf("open %d reconciliation items: %w", len(items), err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("quarantined receipts: %w", err)
	}
	return nil
}

const itemColumns = `id, kind, subject, booking, other_booking, event_id, receipt_id, reason, opened_at, closed_at,
    coalesce(closed_by, ''), note, resolved_by`

func queryItems(ctx context.Context, q reader, sql string, args ...any) ([]calendar.Item, error) {
	return queryRows(ctx, q, scanItem, sql, args...)
}

func scanItem(r pgx.CollectableRow) (it calendar.Item, err error) {
	var (
		event    *[16]byte
		receipt  *int64
		closedAt *time.Time
	)
	if err := r.Scan(&it.ID, &it.Kind, &it.Subject, &it.Booking, &it.OtherBooking, &event, &receipt, &it.Reason, &it.OpenedAt, &closedAt,
		&it.ClosedBy, &it.Note, &it.ResolvedBy); err != nil {
		return it, err
	}
	if event != nil {
		it.EventID = eventlog.EventID(*event)
	}
	if receipt != nil {
		it.ReceiptID = *receipt
	}
	it.ClosedAt = timeOf(closedAt)
	it.OpenedAt = it.OpenedAt.UTC()
	return it, nil
}
