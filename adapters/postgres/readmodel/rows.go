package readmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/projections/calendar"
)

// querier is what both a pool and a transaction offer.
type querier interface {
	reader
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// reader is what a read needs: a pool, a transaction or a batch's transaction (batchTx).
type reader interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// queryRows collects the rows of sql with to.
func queryRows[T any](ctx context.Context, q reader, to pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, to)
}

// PostgreSQL keeps microseconds; every time is cut to them before it is written, so that the binary
// parameters and the JSON rows of one value can never round differently.
func micro(t time.Time) time.Time { return calendar.Micro(t) }

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	m := micro(t)
	return &m
}

func timeOf(p *time.Time) time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.UTC()
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type findingJSON struct {
	Event      string    `json:"event"`
	Type       string    `json:"type"`
	OccurredAt time.Time `json:"occurred_at"`
	Code       string    `json:"code"`
	Reason     string    `json:"reason"`
}

const bookingColumns = `booking, provider, meeting, resources,
    ARRAY(SELECT coalesce(l.name, r.resource) FROM unnest(resources) WITH ORDINALITY AS r(resource, n)
        LEFT JOIN calendar_resource_links l ON l.resource = r.resource ORDER BY r.n), lower(during), upper(during), status, booking_status,
    holder, payment_status, payment_refs, payment_streams, capacity, no_show, scheduled_at, updated_at, stream_version,
    event_count, rescheduled_from, rescheduled_to, cancel_reason, canceled_by, cancel_implied, findings, series, seats, seats_left`

// rowWriter takes a row's values column by column, typed: into COPY's binary format (copyWriter), or
// as the parameters of a statement (columnValues).
type rowWriter interface {
	text(s string)
	texts(s []string) // a text[]; nil is NULL
	int4(v int)
	int8(v int64)
	boolean(v bool)
	nullTimestamptz(t time.Time) // NULL for the zero time
	during(start, end time.Time) // [start, end); NULL when start is the zero time
	jsonb(doc []byte)
}

// writeBooking writes b's values for copyBookingColumns.
func writeBooking(b calendar.Booking, w rowWriter) error {
	findings := []byte("[]") // what Marshal makes of no findings, without its cost for every row
	if len(b.Findings) > 0 {
		fs := make([]findingJSON, len(b.Findings))
		for i, f := range b.Findings {
			fs[i] = findingJSON{Event: f.Event.String(), Type: string(f.Type), OccurredAt: micro(f.OccurredAt), Code: string(f.Code), Reason: f.Reason}
		}
		var err error
		if findings, err = json.Marshal(fs); err != nil {
			return fmt.Errorf("encode findings of %s: %w", b.Booking, err)
		}
	}
	w.text(string(b.Booking))
	w.text(b.Provider)
	w.text(b.Meeting)
	w.texts(nonNil(b.Resources))
	w.during(b.Start, b.End)
	w.text(string(b.Status))
	w.text(string(b.BookingStatus))
	w.boolean(b.Holder)
	w.text(string(b.Payment))
	w.texts(nonNil(b.PaymentRefs))
	w.texts(idStrings(b.PaymentStreams))
	w.int4(b.Capacity)
	w.boolean(b.NoShow)
	w.nullTimestamptz(b.ScheduledAt)
	w.nullTimestamptz(b.UpdatedAt)
	w.int8(int64(b.StreamVersion))
	w.int4(b.Events)
	w.text(string(b.RescheduledFrom))
	w.text(string(b.RescheduledTo))
	w.text(b.CancelReason)
	w.text(b.CanceledBy)
	w.boolean(b.CancelImplied)
	w.jsonb(findings)
	w.text(b.Series)
	// seats and seats_left: NULL for a booking that is not seated
	if b.Seated {
		w.texts(nonNil(b.Seats))
		w.texts(nonNil(b.Left))
	} else {
		w.texts(nil)
		w.texts(nil)
	}
	return nil
}

// columnValues is one row's values as a statement's parameters take them; with literal, a text[]
// goes as its literal (unnest cannot return arrays of different lengths): each element quoted, its
// quotes and backslashes escaped.
type columnValues struct {
	row     []any
	literal bool
}

func (c *columnValues) put(v any)                   { c.row = append(c.row, v) }
func (c *columnValues) text(s string)               { c.put(s) }
func (c *columnValues) int4(v int)                  { c.put(v) }
func (c *columnValues) int8(v int64)                { c.put(v) }
func (c *columnValues) boolean(v bool)              { c.put(v) }
func (c *columnValues) jsonb(doc []byte)            { c.put(string(doc)) }
func (c *columnValues) nullTimestamptz(t time.Time) { c.put(nullTime(t)) }
func (c *columnValues) during(start, end time.Time) { c.put(tsRange(start, end)) }

func (c *columnValues) texts(s []string) {
	switch {
	case s == nil:
		c.put(nil)
	case !c.literal:
		c.put(s)
	default:
		quoted := make([]string, len(s))
		for k, e := range s {
			quoted[k] = `"` + arrayElement.Replace(e) + `"`
		}
		c.put("{" + strings.Join(quoted, ",") + "}")
	}
}

// bookingArrays is rows as one array per column of copyBookingColumns, for unnest.
func bookingArrays(rows []calendar.Booking) ([]any, error) {
	columns := make([]any, len(copyBookingColumns))
	for j := range columns {
		columns[j] = make([]any, len(rows))
	}
	row := columnValues{literal: true}
	for i, b := range rows {
		row.row = row.row[:0]
		if err := writeBooking(b, &row); err != nil {
			return nil, err
		}
		for j, v := range row.row {
			columns[j].([]any)[i] = v
		}
	}
	return columns, nil
}

var arrayElement = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

func scanBooking(row pgx.CollectableRow) (calendar.Booking, error) {
	var (
		b                              calendar.Booking
		start, end, scheduled, updated *time.Time
		streams                        []string
		fs                             []findingJSON
	)
	if err := row.Scan(&b.Booking, &b.Provider, &b.Meeting, &b.Resources, &b.Canonical, &start, &end, &b.Status, &b.BookingStatus,
		&b.Holder, &b.Payment, &b.PaymentRefs, &streams, &b.Capacity, &b.NoShow, &scheduled, &updated, &b.StreamVersion, &b.Events,
		&b.RescheduledFrom, &b.RescheduledTo, &b.CancelReason, &b.CanceledBy, &b.CancelImplied, &fs, &b.Series, &b.Seats, &b.Left); err != nil {
		return calendar.Booking{}, err
	}
	b.Seated = b.Seats != nil
	b.Start, b.End, b.ScheduledAt, b.UpdatedAt = timeOf(start), timeOf(end), timeOf(scheduled), timeOf(updated)
	for _, s := range streams {
		b.PaymentStreams = append(b.PaymentStreams, booking.ID(s))
	}
	for _, f := range fs {
		eid, err := eventlog.ParseEventID(f.Event)
		if err != nil {
			return calendar.Booking{}, fmt.Errorf("findings of %s: %w", b.Booking, err)
		}
		b.Findings = append(b.Findings, booking.Finding{Event: eid, Type: booking.EventType(f.Type), OccurredAt: f.OccurredAt.UTC(),
			Code: booking.FindingCode(f.Code), Reason: f.Reason})
	}
	return b, nil
}

// loadBookingsFrom returns the rows of ids that exist in table, calendar_bookings or a rebuild's
// staging copy.
func loadBookingsFrom(ctx context.Context, q reader, table string, ids []string) (map[booking.ID]calendar.Booking, error) {
	out := map[booking.ID]calendar.Booking{}
	if len(ids) == 0 {
		return out, nil
	}
	list, err := queryRows(ctx, q, scanBooking, `SELECT `+bookingColumns+` FROM `+pgx.Identifier{table}.Sanitize()+` WHERE booking = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("load calendar rows: %w", err)
	}
	for _, b := range list {
		out[b.Booking] = b
	}
	return out, nil
}
