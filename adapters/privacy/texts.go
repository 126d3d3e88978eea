package privacy

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/domain/booking"
	"bookingledger/projections/history"
)

// Texts is the free_texts table (migration 0130), written by the ledger's commit
// (ledger.Commit.Personal).
type Texts struct{ pool *pgxpool.Pool }

// NewTexts returns the free-text table on pool.
func NewTexts(pool *pgxpool.Pool) *Texts { return &Texts{pool: pool} }

// FreeTexts returns the booking's kept texts, erased ones included (for history).
func (t *Texts) FreeTexts(ctx context.Context, id booking.ID) ([]history.KeptText, error) {
	rows, err := t.pool.Query(ctx, `SELECT event, field, text, erased_at FROM free_texts WHERE booking = $1 ORDER BY event, field`, string(id))
	if err != nil {
		return nil, fmt.Errorf("free texts of %s: %w", id, err)
	}
	defer rows.Close()
	var out []history.KeptText
	for rows.Next() {
		k := history.KeptText{FreeText: booking.FreeText{Booking: id}}
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
// history.ErasedMark in their place. It returns how many texts it erased (0 when done before).
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
