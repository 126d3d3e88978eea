package readmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/projections"
)

// querier is what both a pool and a transaction offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PostgreSQL keeps microseconds; every time is cut to them before it is written, so that the binary
// parameters and the JSON rows of one value can never round differently.
func micro(t time.Time) time.Time { return projections.Micro(t) }

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

// bookingRowJSON is one calendar_bookings row as jsonb_to_recordset reads it: a batch of rows is one
// parameter and one statement.
type bookingRowJSON struct {
	Booking         string        `json:"booking"`
	Provider        string        `json:"provider"`
	Meeting         string        `json:"meeting"`
	Resources       []string      `json:"resources"`
	StartAt         *time.Time    `json:"start_at"`
	EndAt           *time.Time    `json:"end_at"`
	Status          string        `json:"status"`
	BookingStatus   string        `json:"booking_status"`
	Holder          bool          `json:"holder"`
	PaymentStatus   string        `json:"payment_status"`
	PaymentRefs     []string      `json:"payment_refs"`
	PaymentStreams  []string      `json:"payment_streams"`
	Capacity        int           `json:"capacity"`
	NoShow          bool          `json:"no_show"`
	ScheduledAt     *time.Time    `json:"scheduled_at"`
	UpdatedAt       *time.Time    `json:"updated_at"`
	StreamVersion   uint64        `json:"stream_version"`
	EventCount      int           `json:"event_count"`
	RescheduledFrom string        `json:"rescheduled_from"`
	RescheduledTo   string        `json:"rescheduled_to"`
	CancelReason    string        `json:"cancel_reason"`
	CanceledBy      string        `json:"canceled_by"`
	CancelImplied   bool          `json:"cancel_implied"`
	Findings        []findingJSON `json:"findings"`
}

func toRowJSON(b projections.Booking) bookingRowJSON {
	streams := make([]string, len(b.PaymentStreams))
	for i, s := range b.PaymentStreams {
		streams[i] = string(s)
	}
	findings := make([]findingJSON, len(b.Findings))
	for i, f := range b.Findings {
		findings[i] = findingJSON{Event: f.Event.String(), Type: string(f.Type), OccurredAt: micro(f.OccurredAt), Code: string(f.Code), Reason: f.Reason}
	}
	return bookingRowJSON{
		Booking: string(b.Booking), Provider: b.Provider, Meeting: b.Meeting, Resources: nonNil(b.Resources),
		StartAt: nullTime(b.Start), EndAt: nullTime(b.End), Status: string(b.Status), BookingStatus: string(b.BookingStatus),
		Holder: b.Holder, PaymentStatus: string(b.Payment), PaymentRefs: nonNil(b.PaymentRefs), PaymentStreams: streams,
		Capacity: b.Capacity, NoShow: b.NoShow, ScheduledAt: nullTime(b.ScheduledAt), UpdatedAt: nullTime(b.UpdatedAt),
		StreamVersion: b.StreamVersion, EventCount: b.Events, RescheduledFrom: string(b.RescheduledFrom),
		RescheduledTo: string(b.RescheduledTo), CancelReason: b.CancelReason, CanceledBy: b.CanceledBy,
		CancelImplied: b.CancelImplied, Findings: findings,
	}
}

const upsertBookingsSQL = `INSERT INTO calendar_bookings AS t (booking, provider, meeting, resources, during, status,
    booking_status, holder, payment_status, payment_refs, payment_streams, capacity, no_show, scheduled_at, updated_at,
    stream_version, event_count, rescheduled_from, rescheduled_to, cancel_reason, canceled_by, cancel_implied, findings,
    projected_at)
SELECT r.booking, r.provider, r.meeting, r.resources,
    CASE WHEN r.start_at IS NULL THEN NULL ELSE tstzrange(r.start_at, r.end_at) END,
    r.status, r.booking_status, r.holder, r.payment_status, r.payment_refs, r.payment_streams, r.capacity, r.no_show,
    r.scheduled_at, r.updated_at, r.stream_version, r.event_count, r.rescheduled_from, r.rescheduled_to,
    r.cancel_reason, r.canceled_by, r.cancel_implied, r.findings, now()
FROM jsonb_to_recordset($1::jsonb) AS r(booking text, provider text, meeting text, resources text[],
    start_at timestamptz, end_at timestamptz, status text, booking_status text, holder boolean, payment_status text,
    payment_refs text[], payment_streams text[], capacity integer, no_show boolean, scheduled_at timestamptz,
    updated_at timestamptz, stream_version bigint, event_count integer, rescheduled_from text, rescheduled_to text,
    cancel_reason text, canceled_by text, cancel_implied boolean, findings jsonb)
ON CONFLICT (booking) DO UPDATE SET provider = excluded.provider, meeting = excluded.meeting,
    resources = excluded.resources, during = excluded.during, status = excluded.status,
    booking_status = excluded.booking_status, holder = excluded.holder, payment_status = excluded.payment_status,
    payment_refs = excluded.payment_refs, payment_streams = excluded.payment_streams, capacity = excluded.capacity,
    no_show = excluded.no_show, scheduled_at = excluded.scheduled_at, updated_at = excluded.updated_at,
    stream_version = excluded.stream_version, event_count = excluded.event_count,
    rescheduled_from = excluded.rescheduled_from, rescheduled_to = excluded.rescheduled_to,
    cancel_reason = excluded.cancel_reason, canceled_by = excluded.canceled_by,
    cancel_implied = excluded.cancel_implied, findings = excluded.findings, projected_at = now()`

func upsertBookings(ctx context.Context, q querier, rows []projections.Booking) error {
	if len(rows) == 0 {
		return nil
	}
	dto := make([]bookingRowJSON, len(rows))
	for i, b := range rows {
		dto[i] = toRowJSON(b)
	}
	body, err := json.Marshal(dto)
	if err != nil {
		return fmt.Errorf("encode calendar rows: %w", err)
	}
	if _, err := q.Exec(ctx, upsertBookingsSQL, body); err != nil {
		return fmt.Errorf("upsert %d calendar rows: %w", len(rows), err)
	}
	var owners, pairOwners, pairRefs []string
	for _, b := range rows {
		owners = append(owners, string(b.Booking))
		for _, r := range b.PaymentRefs {
			pairOwners, pairRefs = append(pairOwners, string(b.Booking)), append(pairRefs, r)
		}
	}
	return replaceRefs(ctx, q, "calendar_booking_refs", "booking", owners, pairOwners, pairRefs)
}

const bookingColumns = `booking, provider, meeting, resources, lower(during), upper(during), status, booking_status,
    holder, payment_status, payment_refs, payment_streams, capacity, no_show, scheduled_at, updated_at, stream_version,
    event_count, rescheduled_from, rescheduled_to, cancel_reason, canceled_by, cancel_implied, findings`

func scanBooking(row pgx.Row) (projections.Booking, error) {
	var (
		b                                  projections.Booking
		id, status, bstatus, pay, from, to string
		start, end, scheduled, updated     *time.Time
		streams                            []string
		version                            int64
		findings                           []byte
	)
	if err := row.Scan(&id, &b.Provider, &b.Meeting, &b.Resources, &start, &end, &status, &bstatus, &b.Holder, &pay,
		&b.PaymentRefs, &streams, &b.Capacity, &b.NoShow, &scheduled, &updated, &version, &b.Events, &from, &to,
		&b.CancelReason, &b.CanceledBy, &b.CancelImplied, &findings); err != nil {
		return projections.Booking{}, err
	}
	b.Booking, b.Status, b.BookingStatus, b.Payment = booking.ID(id), projections.Status(status), booking.Status(bstatus), booking.PaymentStatus(pay)
	b.Start, b.End, b.ScheduledAt, b.UpdatedAt = timeOf(start), timeOf(end), timeOf(scheduled), timeOf(updated)
	b.StreamVersion = uint64(version)
	b.RescheduledFrom, b.RescheduledTo = booking.ID(from), booking.ID(to)
	for _, s := range streams {
		b.PaymentStreams = append(b.PaymentStreams, booking.ID(s))
	}
	var fs []findingJSON
	if err := json.Unmarshal(findings, &fs); err != nil {
		return projections.Booking{}, fmt.Errorf("decode findings of %s: %w", id, err)
	}
	for _, f := range fs {
		eid, err := eventlog.ParseEventID(f.Event)
		if err != nil {
			return projections.Booking{}, fmt.Errorf("findings of %s: %w", id, err)
		}
		b.Findings = append(b.Findings, booking.Finding{Event: eid, Type: booking.EventType(f.Type), OccurredAt: f.OccurredAt.UTC(),
			Code: booking.FindingCode(f.Code), Reason: f.Reason})
	}
	return b, nil
}

// loadBookings returns the calendar rows of ids that exist.
func loadBookings(ctx context.Context, q querier, ids []string) (map[booking.ID]projections.Booking, error) {
	out := map[booking.ID]projections.Booking{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT `+bookingColumns+` FROM calendar_bookings WHERE booking = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("load calendar rows: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (projections.Booking, error) { return scanBooking(r) })
	if err != nil {
		return nil, fmt.Errorf("load calendar rows: %w", err)
	}
	for _, b := range list {
		out[b.Booking] = b
	}
	return out, nil
}
