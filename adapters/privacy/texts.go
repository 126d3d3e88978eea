package privacy

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
)

var _ ledger.FreeTextStore = (*Texts)(nil)

// Texts is the free_texts table (migration 0130).
type Texts struct{ pool *pgxpool.Pool }

// NewTexts returns the free-text table on pool.
func NewTexts(pool *pgxpool.Pool) *Texts { return &Texts{pool: pool} }

// SaveFreeTexts keeps each text once per event and field: a redelivery changes nothing, and neither
// does one that arrives after the text was erased (the erased row stays in the way), nor any text of
// an erased booking (bl_subject_erased, migration 0131, which also waits for an erasure under way).
func (t *Texts) SaveFreeTexts(ctx context.Context, texts []booking.FreeText) error {
	events := make([][16]byte, len(texts))
	fields := make([]string, len(texts))
	bookings := make([]string, len(texts))
	values := make([]string, len(texts))
	for i, ft := range texts {
		events[i], fields[i], bookings[i], values[i] = ft.Event, string(ft.Field), string(ft.Booking), ft.Text
	}
	if _, err := t.pool.Exec(ctx, `INSERT INTO free_texts (event, field, booking, text)
SELECT t.e, t.f, t.b, t.x FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) AS t(e, f, b, x)
WHERE NOT bl_subject_erased(t.b)
ON CONFLICT (event, field) DO NOTHING`, events, fields, bookings, values); err != nil {
		return fmt.Errorf("save %d free texts: %w", len(texts), err)
	}
	return nil
}

// FreeTexts returns the booking's kept texts, erased ones included (for history).
func (t *Texts) FreeTexts(ctx context.Context, id booking.ID) ([]projections.KeptText, error) {
	rows, err := t.pool.Query(ctx, `SELECT event, field, text, erased_at FROM free_texts WHERE booking = $1 ORDER BY event, field`, string(id))
	if err != nil {
		return nil, fmt.Errorf("free texts of %s: %w", id, err)
	}
	defer rows.Close()
	var out []projections.KeptText
	for rows.Next() {
		k := projections.KeptText{FreeText: booking.FreeText{Booking: id}}
		var (
			event  [16]byte
			erased *time.Time
		)
		if err := rows.Scan(&event, &k.Field, &k.Text, &erased); err != nil {
			return nil, fmt.Errorf("free texts of %s: %w", id, err)
		}
		k.Event = event
		if erased != nil {
			k.ErasedAt = *erased
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("free texts of %s: %w", id, err)
	}
	return out, nil
}

// EraseBooking empties the booking's kept texts and records when: history then shows
// projections.ErasedMark in their place. It returns how many texts it erased (0 when done before).
func (t *Texts) EraseBooking(ctx context.Context, q Querier, id booking.ID) (int64, error) {
	tag, err := q.Exec(ctx, `UPDATE free_texts SET text = '', erased_at = now() WHERE booking = $1 AND erased_at IS NULL`, string(id))
	if err != nil {
		return 0, fmt.Errorf("erase free texts of %s: %w", id, err)
	}
	return tag.RowsAffected(), nil
}

// Querier is a pool or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}
