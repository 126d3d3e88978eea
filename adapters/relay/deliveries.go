package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bookingledger/domain/eventlog"
)

// Delivery states.
const (
	StatePending   = "pending"
	StatePaused    = "paused"
	StateSucceeded = "succeeded"
	StateDead      = "dead"
)

// States lists every delivery state: relay_deliveries.state's CHECK list (a test compares them).
var States = []string{StatePending, StatePaused, StateSucceeded, StateDead}

// Delivery is one event for one endpoint.
type Delivery struct {
	ID            int64
	EndpointID    int64
	EventID       string
	WebhookID     string
	Booking       string
	Stream        string
	Version       uint64
	Type          string
	RecordedAt    time.Time
	State         string
	Attempts      int
	ReplayID      int64
	NextAttemptAt time.Time
	LastStatus    int
	LastError     string
	CreatedAt     time.Time
	CompletedAt   time.Time
}

// Attempt is one recorded attempt of a delivery.
type Attempt struct {
	N         int
	At        time.Time
	Status    int // 0: no response
	LatencyMS float64
	Succeeded bool
	Response  string
	Error     string
	// ReplayID is the replay the attempt belongs to (0: the delivery's first run).
	ReplayID int64
}

// DeliveryQuery filters Deliveries; zero fields match everything.
type DeliveryQuery struct {
	EndpointID int64
	State      string
	// Booking lists one booking's deliveries in order: by endpoint, then stream version (the order an
	// ordered endpoint gets them), the first ones first.
	Booking string
	// Limit bounds the rows, newest first (DefaultDeliveryLimit when zero).
	Limit int
}

// DefaultDeliveryLimit bounds a listing.
const DefaultDeliveryLimit = 100

const deliveryColumns = `id, endpoint_id, event_id::text, booking, stream, stream_version, event_type, recorded_at, state,
attempts, coalesce(replay_id, 0), next_attempt_at, coalesce(last_status, 0), last_error, created_at, completed_at`

func scanDelivery(row pgx.Row) (Delivery, error) {
	var (
		d          Delivery
		v          int64
		next, done *time.Time
	)
	if err := row.Scan(&d.ID, &d.EndpointID, &d.EventID, &d.Booking, &d.Stream, &v, &d.Type, &d.RecordedAt, &d.State,
		&d.Attempts, &d.ReplayID, &next, &d.LastStatus, &d.LastError, &d.CreatedAt, &done); err != nil {
		return Delivery{}, err
	}
	d.Version = uint64(v)
	if id, err := eventlog.ParseEventID(d.EventID); err == nil {
		d.WebhookID = WebhookID(id)
	}
	if next != nil {
		d.NextAttemptAt = *next
	}
	if done != nil {
		d.CompletedAt = *done
	}
	return d, nil
}

// Deliveries lists deliveries, newest first; one booking's in order (DeliveryQuery.Booking).
func (r *Relay) Deliveries(ctx context.Context, q DeliveryQuery) ([]Delivery, error) {
	switch q.State {
	case "", StatePending, StatePaused, StateSucceeded, StateDead:
	default:
		return nil, fmt.Errorf("%w: state %q: want pending, paused, succeeded or dead", ErrInvalid, q.State)
	}
	limit := q.Limit
	if limit <= 0 {
		limit = DefaultDeliveryLimit
	}
	order := `id DESC`
	if q.Booking != "" {
		order = `endpoint_id, stream, stream_version, id`
	}
	rows, err := r.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM relay_deliveries
WHERE ($1 = 0 OR endpoint_id = $1) AND ($2 = '' OR state = $2) AND ($3 = '' OR booking = $3)
ORDER BY `+order+` LIMIT $4`, q.EndpointID, q.State, q.Booking, limit)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	defer rows.Close()
	var out []Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("list deliveries: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// DeliveryWithAttempts returns one delivery and its attempts, oldest first.
func (r *Relay) DeliveryWithAttempts(ctx context.Context, id int64) (Delivery, []Attempt, error) {
	d, err := scanDelivery(r.pool.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM relay_deliveries WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Delivery{}, nil, fmt.Errorf("delivery %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Delivery{}, nil, fmt.Errorf("delivery %d: %w", id, err)
	}
	as, err := r.attempts(ctx, id)
	return d, as, err
}

func (r *Relay) attempts(ctx context.Context, id int64) ([]Attempt, error) {
	rows, err := r.pool.Query(ctx, `SELECT attempt, at, coalesce(status, 0), latency_ms, succeeded, response, error, coalesce(replay_id, 0)
FROM relay_attempts WHERE delivery_id = $1 ORDER BY attempt, id`, id)
	if err != nil {
		return nil, fmt.Errorf("attempts of delivery %d: %w", id, err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		if err := rows.Scan(&a.N, &a.At, &a.Status, &a.LatencyMS, &a.Succeeded, &a.Response, &a.Error, &a.ReplayID); err != nil {
			return nil, fmt.Errorf("attempts of delivery %d: %w", id, err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
