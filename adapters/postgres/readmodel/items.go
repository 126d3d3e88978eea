package readmodel

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/projections"
)

// The item queries come in two forms. The scoped ones run in every incremental batch and must cost
// in proportion to the batch, not to the calendar: pgx prepares statements, and after a few executions
// PostgreSQL may switch to a generic plan, which cannot use an index behind "$1 OR …" or a partial
// index whose predicate the parameters only imply. So the scoped forms name their keys directly and
// repeat partial-index predicates literally; TestScopedQueriesStayIndexed checks their generic plans.
// The whole-table forms serve the rebuild, which reads everything anyway.

// allClaimsSQL is every stored claim: the input of the slot-holder rule over the whole calendar.
const allClaimsSQL = `SELECT booking, resource, meeting, lower(during), upper(during), priority_at FROM calendar_slots`

const desiredLateSQL = `SELECT b.booking, f.event, f.type, f.occurred_at, f.code, f.reason
FROM calendar_bookings b
CROSS JOIN LATERAL jsonb_to_recordset(b.findings) AS f(event text, type text, occurred_at timestamptz, code text, reason text)
WHERE b.findings <> '[]'::jsonb`

const scopedLateSQL = desiredLateSQL + ` AND b.booking = ANY($1)`

// existingItemsSQL returns the items that matter for a sync: open ones and those an operator closed
// (never reopened).
const existingItemsSQL = `SELECT ` + itemColumns + ` FROM reconciliation_items
WHERE (closed_at IS NULL OR closed_by = 'operator') AND kind IN ('conflict', 'late_event')`

// scopedItemsSQL is existingItemsSQL for conflicts with a booking of $1 on either side and late events
// of a booking of $2.
const scopedItemsSQL = `SELECT ` + itemColumns + ` FROM reconciliation_items
WHERE (closed_at IS NULL OR closed_by = 'operator')
  AND ((kind = 'conflict' AND booking = ANY($1))
    OR (kind = 'conflict' AND other_booking = ANY($1) AND other_booking <> '')
    OR (kind = 'late_event' AND booking = ANY($2)))`

// syncItems makes the conflict and late-event items of the scope match the calendar: open what the
// calendar calls for (unless an operator closed that subject), refresh reasons, and close with a note
// what it no longer calls for. conflicts are the slot-holder rule's pairs of every booking of
// conflictScope (the bookings whose pairs may have changed), lateScope names those whose findings may
// have changed; all ignores the three and syncs everything, with the rule applied to every stored claim.
func syncItems(ctx context.Context, tx pgx.Tx, conflicts []projections.Conflict, conflictScope, lateScope []string, all bool) error {
	plan, err := planItemSync(ctx, tx, conflicts, conflictScope, lateScope, all)
	if err != nil {
		return err
	}
	return plan.write(ctx, tx)
}

// planItemSync is syncItems' reading half: what the calendar calls for against what the queue holds.
func planItemSync(ctx context.Context, tx pgx.Tx, conflicts []projections.Conflict, conflictScope, lateScope []string, all bool) (itemPlan, error) {
	conflictScope, lateScope = nonNil(conflictScope), nonNil(lateScope)
	lateSQL, lateArgs := scopedLateSQL, []any{lateScope}
	itemsSQL, itemsArgs := scopedItemsSQL, []any{conflictScope, lateScope}
	if all {
		lateSQL, lateArgs = desiredLateSQL, nil
		itemsSQL, itemsArgs = existingItemsSQL, nil
		rows, err := tx.Query(ctx, allClaimsSQL)
		if err != nil {
			return itemPlan{}, fmt.Errorf("claims: %w", err)
		}
		claims, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (c projections.Claim, err error) {
			return c, r.Scan(&c.Booking, &c.Resource, &c.Meeting, &c.Start, &c.End, &c.Priority)
		})
		if err != nil {
			return itemPlan{}, fmt.Errorf("claims: %w", err)
		}
		conflicts = projections.AssignSlots(claims).Conflicts
	}

	rows, err := tx.Query(ctx, lateSQL, lateArgs...)
	if err != nil {
		return itemPlan{}, fmt.Errorf("late events: %w", err)
	}
	desired, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (projections.DesiredItem, error) {
		var (
			b  booking.ID
			ev string
			f  booking.Finding
		)
		if err := r.Scan(&b, &ev, &f.Type, &f.OccurredAt, &f.Code, &f.Reason); err != nil {
			return projections.DesiredItem{}, err
		}
		id, err := eventlog.ParseEventID(ev)
		if err != nil {
			return projections.DesiredItem{}, fmt.Errorf("of %s: %w", b, err)
		}
		f.Event = id
		return projections.LateEventItem(b, f), nil
	})
	if err != nil {
		return itemPlan{}, fmt.Errorf("late events: %w", err)
	}

	existing, err := queryItems(ctx, tx, itemsSQL, itemsArgs...)
	if err != nil {
		return itemPlan{}, fmt.Errorf("existing items: %w", err)
	}

	var need orderedSet
	for _, c := range conflicts {
		need.add(string(c.Booking))
		need.add(string(c.Holder))
	}
	for _, it := range existing {
		if it.Open() && it.Kind == projections.ItemConflict {
			need.add(string(it.Booking))
			need.add(string(it.OtherBooking))
		}
	}
	bookings, err := loadBookings(ctx, tx, need.items)
	if err != nil {
		return itemPlan{}, err
	}
	for _, c := range conflicts {
		desired = append(desired, projections.ConflictItem(c, bookings[c.Booking], bookings[c.Holder]))
	}
	return planItems(desired, existing, bookings), nil
}

// itemPlan is the writes that make the reconciliation queue match a calendar.
type itemPlan struct {
	insert                     []projections.DesiredItem
	refreshIDs, closeIDs       []int64
	refreshReasons, closeNotes []string
}

// planItems opens what desired calls for (unless an operator closed that subject), refreshes the
// reasons of open items, and closes with a note the open items desired no longer calls for. bookings
// holds the calendar rows of every booking named by a desired or open conflict item.
func planItems(desired []projections.DesiredItem, existing []projections.Item, bookings map[booking.ID]projections.Booking) itemPlan {
	open := map[projections.ItemKey]projections.Item{}
	resolved := map[projections.ItemKey]bool{}
	for _, it := range existing {
		if it.Open() {
			open[it.Key()] = it
		} else {
			resolved[it.Key()] = true
		}
	}
	want := map[projections.ItemKey]bool{}
	var insert []projections.DesiredItem
	var refreshIDs []int64
	var refreshReasons []string
	for _, d := range desired {
		want[d.Key()] = true
		if it, ok := open[d.Key()]; ok {
			if it.Reason != d.Reason {
				refreshIDs, refreshReasons = append(refreshIDs, it.ID), append(refreshReasons, d.Reason)
			}
			continue
		}
		if !resolved[d.Key()] {
			insert = append(insert, d)
		}
	}
	var closeIDs []int64
	var closeNotes []string
	for _, it := range existing {
		if !it.Open() || want[it.Key()] {
			continue
		}
		var b, o *projections.Booking
		if row, ok := bookings[it.Booking]; ok {
			b = &row
		}
		if row, ok := bookings[it.OtherBooking]; ok {
			o = &row
		}
		closeIDs, closeNotes = append(closeIDs, it.ID), append(closeNotes, projections.AutoCloseNote(it, b, o))
	}

	return itemPlan{insert: insert, refreshIDs: refreshIDs, refreshReasons: refreshReasons, closeIDs: closeIDs, closeNotes: closeNotes}
}

func (p itemPlan) write(ctx context.Context, tx pgx.Tx) error {
	insert, refreshIDs, refreshReasons, closeIDs, closeNotes := p.insert, p.refreshIDs, p.refreshReasons, p.closeIDs, p.closeNotes
	if err := insertItems(ctx, tx, insert); err != nil {
		return err
	}
	if len(refreshIDs) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE reconciliation_items i SET reason = u.reason
FROM unnest($1::bigint[], $2::text[]) AS u(id, reason) WHERE i.id = u.id AND i.closed_at IS NULL`, refreshIDs, refreshReasons); err != nil {
			return fmt.Errorf("refresh item reasons: %w", err)
		}
	}
	if len(closeIDs) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE reconciliation_items i SET closed_at = now(), closed_by = 'auto', note = u.note
FROM unnest($1::bigint[], $2::text[]) AS u(id, note) WHERE i.id = u.id AND i.closed_at IS NULL`, closeIDs, closeNotes); err != nil {
			return fmt.Errorf("close items: %w", err)
		}
	}
	return nil
}

func insertItems(ctx context.Context, q querier, items []projections.DesiredItem) error {
	if len(items) == 0 {
		return nil
	}
	slices.SortFunc(items, func(a, b projections.DesiredItem) int {
		if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return cmp.Compare(a.Subject, b.Subject)
	})
	n := len(items)
	kinds, subjects, bs, others, reasons := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	events := make([]*[16]byte, n)
	receipts := make([]*int64, n)
	for i, d := range items {
		kinds[i], subjects[i], bs[i], others[i], reasons[i] = string(d.Kind), d.Subject, string(d.Booking), string(d.OtherBooking), d.Reason
		if !d.EventID.IsZero() {
			id := [16]byte(d.EventID)
			events[i] = &id
		}
		if d.ReceiptID != 0 {
			r := d.ReceiptID
			receipts[i] = &r
		}
	}
	if _, err := q.Exec(ctx, `INSERT INTO reconciliation_items (kind, subject, booking, other_booking, event_id, receipt_id, reason)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::uuid[], $6::bigint[], $7::text[])
ON CONFLICT (kind, subject) WHERE closed_at IS NULL DO NOTHING`, kinds, subjects, bs, others, events, receipts, reasons); err != nil {
		return fmt.Errorf("open %d reconciliation items: %w", n, err)
	}
	return nil
}

// syncQuarantine opens an item for every quarantined receipt that never had one. Receipts are not
// events, so this runs when the runner is caught up and before the queue is listed; it is idempotent.
func syncQuarantine(ctx context.Context, q querier) error {
	rows, err := q.Query(ctx, `SELECT r.id, r.provider, r.delivery_id, r.reason, coalesce(r.bookings[1], '')
FROM receipts r
WHERE r.outcome = 'quarantined'
  AND NOT EXISTS (SELECT 1 FROM reconciliation_items i WHERE i.kind = 'quarantined' AND i.receipt_id = r.id)
ORDER BY r.id`)
	if err != nil {
		return fmt.Errorf("quarantined receipts: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (projections.DesiredItem, error) {
		var (
			id                         int64
			provider, delivery, reason string
			bk                         booking.ID
		)
		err := r.Scan(&id, &provider, &delivery, &reason, &bk)
		return projections.QuarantineItem(id, provider, delivery, reason, bk), err
	})
	if err != nil {
		return fmt.Errorf("quarantined receipts: %w", err)
	}
	return insertItems(ctx, q, items)
}

const itemColumns = `id, kind, subject, booking, other_booking, event_id, receipt_id, reason, opened_at, closed_at,
    coalesce(closed_by, ''), note, resolved_by`

func queryItems(ctx context.Context, q querier, sql string, args ...any) ([]projections.Item, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (it projections.Item, err error) {
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
	})
}
