package readmodel

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"bookingledger/adapters/postgres"
	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
	"bookingledger/projections/history"
)

// MaxNoteLength bounds a resolution note (bytes).
const MaxNoteLength = 4000

// Booking returns the booking's calendar row, or projections.ErrNotFound.
func (m *ReadModel) Booking(ctx context.Context, id booking.ID) (calendar.Booking, error) {
	rows, err := queryRows(ctx, m.pool, scanBooking, `SELECT `+bookingColumns+` FROM calendar_bookings WHERE booking = $1`, string(id))
	switch {
	case err != nil:
		return calendar.Booking{}, fmt.Errorf("booking %s: %w", id, err)
	case len(rows) == 0:
		return calendar.Booking{}, fmt.Errorf("booking %s: %w", id, projections.ErrNotFound)
	}
	return rows[0], nil
}

// calendarSQL is Calendar's query: $1 from, $2 to, $3 resource (empty for all; a provider resource or
// the name it is linked to), $4 the row limit, and
// the cursor ($5 start, $6 resource, $7 booking) the page begins strictly after (keyset pagination: a
// page costs the same wherever it is in the window). Both branches also bound the start by the
// cursor's, so that a later page does not read the earlier ones' rows again.
const calendarSQL = `SELECT b.booking, b.provider, b.meeting, r.resource, coalesce(l.name, r.resource), lower(b.during), upper(b.during), b.status
FROM (
    SELECT * FROM calendar_bookings
    WHERE lower(during) >= $1::timestamptz - interval '7 days' AND lower(during) < $2 AND during && tstzrange($1, $2)
      AND lower(during) >= $5
  UNION ALL
    SELECT * FROM calendar_bookings
    WHERE upper(during) - lower(during) > interval '7 days' AND during && tstzrange($1, $2)
      AND NOT (lower(during) >= $1::timestamptz - interval '7 days' AND lower(during) < $2)
      AND lower(during) >= $5
) b
CROSS JOIN LATERAL unnest(b.resources) AS r(resource)
LEFT JOIN calendar_resource_links l ON l.resource = r.resource
WHERE ($3 = '' OR r.resource = $3 OR l.name = $3) AND (lower(b.during), r.resource, b.booking) > ($5::timestamptz, $6::text, $7::text)
ORDER BY lower(b.during), r.resource, b.booking
LIMIT $4`

// Calendar returns a page of entries, one per (booking, resource) whose slot overlaps [q.From, q.To),
// of every status (clients filter), ordered by start, resource and booking; More says another page
// follows (one row more than the page is read to know). A booking overlapping the window
// either starts at most seven days before it (btree on the start) or is longer than seven days (the
// partial GiST calendar_bookings_long_idx, whose predicate the query repeats literally so that the
// planner can use it). The two are separate branches rather than one OR: under a generic plan an OR
// of both led the planner to walk the whole start index in order (TestScopedQueriesStayIndexed).
func (m *ReadModel) Calendar(ctx context.Context, q calendar.CalendarQuery) (calendar.CalendarPage, error) {
	if err := q.Validate(); err != nil {
		return calendar.CalendarPage{}, err
	}
	var after calendar.CalendarCursor // zero on the first page: year 1 precedes any start
	if q.After != nil {
		after = *q.After
	}
	size := q.PageSize()
	rows, err := m.pool.Query(ctx, calendarSQL, q.From, q.To, q.Resource, size+1, after.Start, after.Resource, string(after.Booking))
	if err != nil {
		return calendar.CalendarPage{}, fmt.Errorf("calendar: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (e calendar.CalendarEntry, err error) {
		err = r.Scan(&e.Booking, &e.Provider, &e.Meeting, &e.Resource, &e.Canonical, &e.Start, &e.End, &e.Status)
		e.Start, e.End = e.Start.UTC(), e.End.UTC()
		return e, err
	})
	if err != nil {
		return calendar.CalendarPage{}, fmt.Errorf("calendar: %w", err)
	}
	if len(out) > size {
		return calendar.CalendarPage{Entries: out[:size], More: true}, nil
	}
	return calendar.CalendarPage{Entries: out}, nil
}

// OpenItems returns the open reconciliation items, oldest first. It first opens items for quarantined
// receipts that have none, so the queue is complete even when no event has arrived since.
func (m *ReadModel) OpenItems(ctx context.Context) ([]calendar.Item, error) {
	if err := m.syncQuarantine(ctx); err != nil {
		return nil, err
	}
	items, err := queryItems(ctx, m.pool, `SELECT `+itemColumns+` FROM reconciliation_items WHERE closed_at IS NULL ORDER BY opened_at, id`)
	if err != nil {
		return nil, fmt.Errorf("open reconciliation items: %w", err)
	}
	return items, nil
}

// Items returns every reconciliation item naming the booking, open and closed, oldest first.
func (m *ReadModel) Items(ctx context.Context, id booking.ID) ([]calendar.Item, error) {
	items, err := queryItems(ctx, m.pool, `SELECT `+itemColumns+` FROM reconciliation_items
WHERE booking = $1 OR other_booking = $1 ORDER BY opened_at, id`, string(id))
	if err != nil {
		return nil, fmt.Errorf("reconciliation items of %s: %w", id, err)
	}
	return items, nil
}

// Resolve closes an open item with an operator's note; by names the operator (a token's name, or the
// CLI's user) and is required. It fails with projections.ErrNotFound for an
// unknown id, projections.ErrItemClosed for a closed item and projections.ErrInvalidQuery for an empty
// or oversized note. A resolved subject is never reopened automatically.
func (m *ReadModel) Resolve(ctx context.Context, id int64, note, by string) (calendar.Item, error) {
	note, by = strings.TrimSpace(note), strings.TrimSpace(by)
	switch {
	case by == "" || len(by) > MaxNoteLength || !ledger.Storable(by):
		return calendar.Item{}, fmt.Errorf("%w: who resolves the item must be named (valid UTF-8 without NUL, at most %d bytes)", projections.ErrInvalidQuery, MaxNoteLength)
	case note == "":
		return calendar.Item{}, fmt.Errorf("%w: a resolution note is required", projections.ErrInvalidQuery)
	case len(note) > MaxNoteLength || !ledger.Storable(note):
		return calendar.Item{}, fmt.Errorf("%w: note must be valid UTF-8 without NUL, at most %d bytes", projections.ErrInvalidQuery, MaxNoteLength)
	}
	// A process step's item is closed with the step's resolution (adapters/postgres/stepstore.Store.Resolve):
	// closing it alone would leave the step waiting for a decision nobody sees any more.
	items, err := queryItems(ctx, m.pool, `UPDATE reconciliation_items SET closed_at = now(), closed_by = 'operator', note = $2, resolved_by = $3
WHERE id = $1 AND closed_at IS NULL AND kind <> 'step' RETURNING `+itemColumns, id, note, by)
	if err != nil {
		return calendar.Item{}, fmt.Errorf("resolve item %d: %w", id, err)
	}
	if len(items) == 1 {
		return items[0], nil
	}
	var exists, step bool
	if err := m.pool.QueryRow(ctx, `SELECT count(*) > 0, coalesce(bool_or(kind = 'step' AND closed_at IS NULL), false) FROM reconciliation_items WHERE id = $1`,
		id).Scan(&exists, &step); err != nil {
		return calendar.Item{}, fmt.Errorf("resolve item %d: %w", id, err)
	}
	if step {
		return calendar.Item{}, fmt.Errorf("%w: item %d is a process step whose outcome is unknown: resolve it with an action (bookingledger reconcile resolve %d --action mark-done|retry|skip)",
			projections.ErrInvalidQuery, id, id)
	}
	if exists {
		return calendar.Item{}, fmt.Errorf("resolve item %d: %w", id, projections.ErrItemClosed)
	}
	return calendar.Item{}, fmt.Errorf("resolve item %d: %w", id, projections.ErrNotFound)
}

// History computes the booking's history for auditors from its stream (through the event-store
// port), its receipts, its calendar row and its reconciliation items. projections.ErrNotFound when
// none of them knows the booking.
func (m *ReadModel) History(ctx context.Context, id booking.ID) (history.History, error) {
	recs, err := m.events.ReadStream(ctx, id.Stream())
	if err != nil {
		return history.History{}, fmt.Errorf("history of %s: %w", id, err)
	}
	events := make([]booking.Event, len(recs))
	for i, rec := range recs {
		if events[i], err = m.codec.Decode(rec); err != nil {
			return history.History{}, fmt.Errorf("history of %s: decode v%d: %w", id, rec.Version, err)
		}
	}
	stored, err := m.opts.Receipts.ReceiptsForBooking(ctx, string(id))
	if err != nil {
		return history.History{}, fmt.Errorf("history of %s: %w", id, err)
	}
	receipts := receiptEntries(stored)
	var row *calendar.Booking
	switch b, err := m.Booking(ctx, id); {
	case err == nil:
		row = &b
	case !errors.Is(err, projections.ErrNotFound):
		return history.History{}, err
	}
	items, err := m.Items(ctx, id)
	if err != nil {
		return history.History{}, err
	}
	if len(recs) == 0 && len(receipts) == 0 && row == nil {
		return history.History{}, fmt.Errorf("history of %s: %w", id, projections.ErrNotFound)
	}
	var texts []history.KeptText
	if m.opts.Texts != nil {
		if texts, err = m.opts.Texts.FreeTexts(ctx, id); err != nil {
			return history.History{}, fmt.Errorf("history of %s: %w", id, err)
		}
	}
	h := history.BuildHistory(history.HistoryInput{
		Booking: id, Recorded: recs, Events: events, Receipts: receipts, Row: row, Items: items, Texts: texts,
	})
	if m.opts.Steps != nil {
		if h.Steps, err = m.opts.Steps.StepsForBooking(ctx, id); err != nil {
			return history.History{}, fmt.Errorf("history of %s: %w", id, err)
		}
	}
	return h, nil
}

// StepSource lists a booking's process steps (adapters/postgres/stepstore.Store).
type StepSource interface {
	StepsForBooking(ctx context.Context, id booking.ID) ([]history.StepEntry, error)
}

// TextSource reads the free texts kept apart from a booking's events (adapters/privacy.Texts).
type TextSource interface {
	FreeTexts(ctx context.Context, id booking.ID) ([]history.KeptText, error)
}

func receiptEntry(s postgres.StoredReceipt) history.ReceiptEntry {
	r := s.Receipt
	return history.ReceiptEntry{ID: s.ID, Provider: r.Provider, ReceivedAt: r.ReceivedAt.UTC(), DeliveryID: r.DeliveryID,
		Secret: r.Secret, Outcome: r.Outcome, Reason: r.Reason, Events: r.Events,
		Repeats: s.Repeats, LastReceivedAt: s.LastReceivedAt.UTC()}
}

func receiptEntries(stored []postgres.StoredReceipt) []history.ReceiptEntry {
	out := make([]history.ReceiptEntry, len(stored))
	for i, s := range stored {
		out[i] = receiptEntry(s)
	}
	return out
}

// MaxReceiptLimit bounds one receipts listing.
const MaxReceiptLimit = 1000

// Receipts lists the receipts q selects, newest first. projections.ErrInvalidQuery for a limit out of
// range.
func (m *ReadModel) Receipts(ctx context.Context, q history.ReceiptQuery) ([]history.ReceiptEntry, error) {
	if q.Limit < 0 || q.Limit > MaxReceiptLimit {
		return nil, fmt.Errorf("%w: limit must be between 1 and %d", projections.ErrInvalidQuery, MaxReceiptLimit)
	}
	stored, err := m.opts.Receipts.ListReceipts(ctx, postgres.ReceiptFilter{Outcome: q.Outcome, Provider: q.Provider, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	return receiptEntries(stored), nil
}

// Receipt is one receipt with its body and the other receipts of its delivery; projections.ErrNotFound
// when there is none with that id.
func (m *ReadModel) Receipt(ctx context.Context, id int64) (history.ReceiptDetail, error) {
	s, related, found, err := m.opts.Receipts.ReceiptAndRelated(ctx, id)
	if err != nil {
		return history.ReceiptDetail{}, err
	}
	if !found {
		return history.ReceiptDetail{}, fmt.Errorf("receipt %d: %w", id, projections.ErrNotFound)
	}
	d := history.ReceiptDetail{ReceiptEntry: receiptEntry(s), RecordedAt: s.RecordedAt.UTC(), Headers: s.Receipt.Headers, Body: s.Receipt.Body,
		Pending: s.Receipt.Booking, Related: receiptEntries(related)}
	switch {
	case s.Body.Erased && s.Body.ErasedAt.IsZero():
		d.BodyNote = "[erased]"
	case s.Body.Erased:
		d.BodyNote = history.ErasedMark(s.Body.ErasedAt)
	case s.Body.Sealed:
		d.BodyNote = "sealed (encrypted; set BOOKINGLEDGER_MASTER_KEY to read it)"
	}
	return d, nil
}
