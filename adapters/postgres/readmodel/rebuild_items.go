package readmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/projections"
)

// A rebuild that writes everything at once already holds every calendar row and the whole slot
// assignment in memory, so it derives the reconciliation items from them instead of reading them back
// (planItemSync with all: a self-join over every claim, every row's findings, and the rows of every
// booking an item names). The plan must be exactly the one planItemSync would make from the rows just
// written: memItemPlan mirrors each of its inputs as the database would return it, and
// TestRebuildItemPlanEqualsSQLPlan compares the two on the same database.

// memItemPlan is planItemSync(all) computed from rows (final statuses and holder flags, as written)
// and conflicts (AssignSlots' pairs over every claim of rows), inside tx. The existing items are read:
// operators' decisions are not in the log.
func memItemPlan(ctx context.Context, tx pgx.Tx, rows []projections.Booking, conflicts []projections.Conflict) (itemPlan, error) {
	var desired []projections.DesiredItem
	for _, b := range rows {
		if len(b.Findings) == 0 {
			continue
		}
		findings, err := storedFindings(b)
		if err != nil {
			return itemPlan{}, err
		}
		for _, f := range findings {
			desired = append(desired, projections.LateEventItem(b.Booking, f))
		}
	}
	existing, err := queryItems(ctx, tx, existingItemsSQL)
	if err != nil {
		return itemPlan{}, fmt.Errorf("existing items: %w", err)
	}

	index := make(map[booking.ID]int, len(rows))
	for i, b := range rows {
		index[b.Booking] = i
	}
	// Only the rows planItemSync loads: a booking named by a conflict or by an open conflict item.
	bookings := map[booking.ID]projections.Booking{}
	need := func(id booking.ID) {
		if i, ok := index[id]; ok {
			bookings[id] = storedRow(rows[i])
		}
	}
	for _, c := range conflicts {
		need(c.Booking)
		need(c.Holder)
	}
	for _, it := range existing {
		if it.Open() && it.Kind == projections.ItemConflict {
			need(it.Booking)
			need(it.OtherBooking)
		}
	}
	for _, c := range conflicts {
		desired = append(desired, projections.ConflictItem(c, bookings[c.Booking], bookings[c.Holder]))
	}
	return planItems(desired, existing, bookings), nil
}

// storedRow is b as scanBooking reads it back: times in microseconds and UTC. (Text columns come back
// unchanged: the COPY refuses what PostgreSQL could not store as it is.)
func storedRow(b projections.Booking) projections.Booking {
	b.Start, b.End = zeroOrMicro(b.Start), zeroOrMicro(b.End)
	b.ScheduledAt, b.UpdatedAt = zeroOrMicro(b.ScheduledAt), zeroOrMicro(b.UpdatedAt)
	return b
}

func zeroOrMicro(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return micro(t)
}

// storedFindings are b's findings as desiredLateSQL reads them from the findings column: through the
// same JSON encoding (which, for one, replaces invalid UTF-8).
func storedFindings(b projections.Booking) ([]booking.Finding, error) {
	body, err := json.Marshal(toRowJSON(b).Findings)
	if err != nil {
		return nil, fmt.Errorf("encode findings of %s: %w", b.Booking, err)
	}
	var fs []findingJSON
	if err := json.Unmarshal(body, &fs); err != nil {
		return nil, fmt.Errorf("decode findings of %s: %w", b.Booking, err)
	}
	out := make([]booking.Finding, len(fs))
	for i, f := range fs {
		id, err := eventlog.ParseEventID(f.Event)
		if err != nil {
			return nil, fmt.Errorf("late events of %s: %w", b.Booking, err)
		}
		out[i] = booking.Finding{Event: id, Type: booking.EventType(f.Type), OccurredAt: f.OccurredAt.UTC(),
			Code: booking.FindingCode(f.Code), Reason: f.Reason}
	}
	return out, nil
}

// finishRebuild syncs the reconciliation items with rows and ends the rebuild, in the transaction
// that writes rows.
func (m *ReadModel) finishRebuild(ctx context.Context, tx pgx.Tx, rows []projections.Booking, conflicts []projections.Conflict) error {
	plan, err := memItemPlan(ctx, tx, rows, conflicts)
	if err != nil {
		return err
	}
	if m.compareItemPlan != nil {
		sqlPlan, err := planItemSync(ctx, tx, nil, nil, nil, true)
		if err != nil {
			return err
		}
		m.compareItemPlan(plan, sqlPlan)
	}
	if err := plan.write(ctx, tx); err != nil {
		return err
	}
	return checkpoint.EndRebuild(ctx, tx, ProjectionName)
}
