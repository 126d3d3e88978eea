package relaystore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Candidate is a delivery a replay may send again.
type Candidate struct {
	ID            int64
	EventID, Type string
	RecordedAt    time.Time
	Stream        string
	Version       uint64
}

// ReplayCandidates returns the endpoint's deliveries in one of states whose events were recorded in
// [from, to) (only delivery when it is not 0), in recorded order; lock locks them (q a transaction).
func ReplayCandidates(ctx context.Context, q Querier, ep int64, from, to time.Time, states []string, delivery int64, lock bool) ([]Candidate, error) {
	sql := `SELECT id, event_id::text, event_type, recorded_at, stream, stream_version FROM relay_deliveries
WHERE endpoint_id = $1 AND recorded_at >= $2 AND recorded_at < $3 AND state = ANY($4) AND ($5 = 0 OR id = $5)
ORDER BY recorded_at, id`
	if lock {
		sql += ` FOR UPDATE`
	}
	rows, err := q.Query(ctx, sql, ep, from, to, states, delivery)
	if err != nil {
		return nil, fmt.Errorf("select replay: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Candidate, error) {
		var (
			c Candidate
			v int64
		)
		err := row.Scan(&c.ID, &c.EventID, &c.Type, &c.RecordedAt, &c.Stream, &v)
		c.Version = uint64(v)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("select replay: %w", err)
	}
	return out, nil
}

// InsertReplay records a replay of the endpoint's window [from, to) with its first total and rate.
func InsertReplay(ctx context.Context, tx pgx.Tx, ep int64, from, to time.Time, types []string, onlyFailed bool, total int, rate float64) (Replay, error) {
	rep := Replay{EndpointID: ep}
	if err := tx.QueryRow(ctx, `INSERT INTO relay_replays (endpoint_id, from_time, to_time, types, only_failed, total, rate)
VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id, created_at`, ep, from, to, types, onlyFailed, total, rate).Scan(&rep.ID, &rep.CreatedAt); err != nil {
		return Replay{}, fmt.Errorf("insert replay: %w", err)
	}
	return rep, nil
}

// ScheduleReplay makes the deliveries of ids pending again, due now, as deliveries of replay rep with
// a fresh run of the schedule.
func ScheduleReplay(ctx context.Context, tx pgx.Tx, ids []int64, rep int64) error {
	if _, err := tx.Exec(ctx, `UPDATE relay_deliveries SET state = 'pending', run_attempts = 0, replay_id = $2,
    next_attempt_at = now(), completed_at = NULL WHERE id = ANY($1)`, ids, rep); err != nil {
		return fmt.Errorf("schedule replay: %w", err)
	}
	return nil
}

// AddToReplay adds n deliveries to a replay's total.
func AddToReplay(ctx context.Context, tx pgx.Tx, rep int64, n int) error {
	if _, err := tx.Exec(ctx, `UPDATE relay_replays SET total = total + $2 WHERE id = $1`, rep, n); err != nil {
		return fmt.Errorf("replay total: %w", err)
	}
	return nil
}

// LockState locks a delivery and returns its state.
func LockState(ctx context.Context, tx pgx.Tx, id int64) (string, error) {
	var state string
	err := tx.QueryRow(ctx, `SELECT state FROM relay_deliveries WHERE id = $1 FOR UPDATE`, id).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("delivery %d: %w", id, ErrNotFound)
	}
	return state, err
}

// RetryAsReplay records a replay of the pending delivery d alone and makes its next attempt due now,
// with a fresh run of the schedule.
func RetryAsReplay(ctx context.Context, tx pgx.Tx, d Delivery) (Replay, error) {
	rep := Replay{EndpointID: d.EndpointID}
	if err := tx.QueryRow(ctx, `INSERT INTO relay_replays (endpoint_id, from_time, to_time, types, only_failed, total)
VALUES ($1, $2, $3, '{}', false, 1) RETURNING id, created_at`, d.EndpointID, d.RecordedAt, d.RecordedAt.Add(time.Microsecond)).Scan(&rep.ID, &rep.CreatedAt); err != nil {
		return Replay{}, fmt.Errorf("insert replay: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE relay_deliveries SET run_attempts = 0, replay_id = $2, next_attempt_at = now() WHERE id = $1`,
		d.ID, rep.ID); err != nil {
		return Replay{}, fmt.Errorf("schedule retry: %w", err)
	}
	return rep, nil
}

// ReplayStatus returns a replay's progress.
func (s *Store) ReplayStatus(ctx context.Context, id int64) (Replay, error) {
	rep := Replay{ID: id}
	err := s.pool.QueryRow(ctx, `SELECT endpoint_id, total, created_at,
    (SELECT count(*) FILTER (WHERE state = 'succeeded') FROM relay_deliveries WHERE replay_id = $1),
    (SELECT count(*) FILTER (WHERE state = 'dead') FROM relay_deliveries WHERE replay_id = $1),
    (SELECT count(*) FILTER (WHERE state IN ('pending', 'paused')) FROM relay_deliveries WHERE replay_id = $1)
FROM relay_replays WHERE id = $1`, id).Scan(&rep.EndpointID, &rep.Total, &rep.CreatedAt, &rep.Succeeded, &rep.Dead, &rep.Pending)
	if errors.Is(err, pgx.ErrNoRows) {
		return Replay{}, fmt.Errorf("replay %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Replay{}, fmt.Errorf("replay %d: %w", id, err)
	}
	return rep, nil
}
