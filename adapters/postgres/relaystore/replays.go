package relaystore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bookingledger/domain/eventlog"
	prelay "bookingledger/projections/relay"
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

// SelectReplay returns the deliveries a replay of qr sends again, in recorded order: its candidates
// narrowed by what the endpoint takes now (rule, its types and filter: projections/relay.Selects,
// with subs computing the subjects its filter looks at); lock locks them (q a transaction).
func SelectReplay(ctx context.Context, q Querier, qr prelay.ReplayQuery, rule prelay.Rule, subs *prelay.Subjects, lock bool) ([]prelay.ReplayItem, error) {
	cs, err := ReplayCandidates(ctx, q, qr.EndpointID, qr.From, qr.To, qr.States(), qr.DeliveryID, lock)
	if err != nil {
		return nil, err
	}
	var out []prelay.ReplayItem
	for _, c := range cs {
		if !prelay.MatchTypes(qr.Types, c.Type) ||
			!prelay.Selects(rule, c.Type, func() prelay.Subject { return subs.Of(c.Stream, c.Version) }) {
			continue
		}
		out = append(out, prelay.ReplayItem{DeliveryID: c.ID, WebhookID: "msg_" + c.EventID, Type: c.Type, RecordedAt: c.RecordedAt})
	}
	if subs.Err() != nil {
		return nil, fmt.Errorf("select replay: filter: %w", subs.Err())
	}
	return out, nil
}

// StartReplay records a replay of qr at rate in one transaction: it selects and locks the deliveries
// it sends again (SelectReplay, with the endpoint's rule now), records the replay with their total,
// schedules them again as its own (ScheduleReplay) and calls enqueue, in the transaction, with their
// IDs in recorded order (their jobs). It returns the replay and its items.
func (s *Store) StartReplay(ctx context.Context, qr prelay.ReplayQuery, rule prelay.Rule, subs *prelay.Subjects, rate float64,
	enqueue func(tx pgx.Tx, ids []int64) error) (Replay, []prelay.ReplayItem, error) {
	var (
		rep   Replay
		items []prelay.ReplayItem
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if items, err = SelectReplay(ctx, tx, qr, rule, subs, true); err != nil {
			return err
		}
		types := qr.Types
		if types == nil {
			types = []string{}
		}
		if rep, err = InsertReplay(ctx, tx, qr.EndpointID, qr.From, qr.To, types, qr.OnlyFailed, len(items), rate); err != nil {
			return err
		}
		ids := make([]int64, len(items))
		for i, it := range items {
			ids[i] = it.DeliveryID
		}
		if err := ScheduleReplay(ctx, tx, ids, rep.ID); err != nil {
			return err
		}
		return enqueue(tx, ids)
	})
	if err != nil {
		return Replay{}, nil, err
	}
	return rep, items, nil
}

// EachBackfill pages through the whole log with readAll, page events at a time, and calls fn with
// each page's events a replay of q backfills for endpoint ep, whose rule now is rule, if they have no
// delivery of it yet (fn tells; projections/relay.Backfills chooses them, with the subjects of a
// fresh subjects() per page). The log is read through the event-store port, as the fan-out reads
// it, and never held whole. Its order is not that of the recorded times, so every page is read; a
// short page ends it, since whatever is recorded later reaches the endpoint by the fan-out.
func EachBackfill(ctx context.Context, readAll func(from eventlog.Position, n int) ([]eventlog.RecordedEvent, error), page int,
	ep int64, rule prelay.Rule, q prelay.ReplayQuery, subjects func() *prelay.Subjects, fn func(NewDeliveries) error) error {
	var from eventlog.Position
	for {
		events, err := readAll(from, page)
		if err != nil {
			return fmt.Errorf("backfill: read the log after %s: %w", from, err)
		}
		var news NewDeliveries
		subs := subjects()
		for _, p := range prelay.Backfills(events, ep, rule, q, subs.Of) {
			news.Add(p.Endpoint, p.Event, p.Booking, p.State)
		}
		if subs.Err() != nil {
			return fmt.Errorf("backfill: filter: %w", subs.Err())
		}
		if news.Len() > 0 {
			if err := fn(news); err != nil {
				return err
			}
		}
		if len(events) < page {
			return nil
		}
		from = events[len(events)-1].Position
	}
}

// Unplanned returns the replay items of news, deliveries of endpoint ep to be, whose events have no
// delivery of the endpoint yet: what a backfill would add now.
func (s *Store) Unplanned(ctx context.Context, ep int64, news NewDeliveries) ([]prelay.ReplayItem, error) {
	ids := make([]string, news.Len())
	for i := range ids {
		ids[i], _, _ = news.Event(i)
	}
	have, err := s.ExistingEvents(ctx, ep, ids)
	if err != nil {
		return nil, fmt.Errorf("backfill: deliveries: %w", err)
	}
	var out []prelay.ReplayItem
	for i, id := range ids {
		if !have[id] {
			_, typ, at := news.Event(i)
			out = append(out, prelay.ReplayItem{WebhookID: "msg_" + id, Type: typ, RecordedAt: at.Truncate(time.Microsecond)})
		}
	}
	return out, nil
}

// Backfill inserts news as deliveries of replay rep, adds those it created to the replay's total and
// calls enqueue with their IDs (their jobs), in one transaction, and returns their replay items. A
// backfill commits each page on its own: an open transaction holds back every reader of the
// PostgreSQL log (it reads below the oldest one), so one transaction over a whole log would stall the
// projections, the backfill's own paging included.
func (s *Store) Backfill(ctx context.Context, rep int64, news NewDeliveries, enqueue func(tx pgx.Tx, ids []int64) error) ([]prelay.ReplayItem, error) {
	var items []prelay.ReplayItem
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		items = items[:0]
		var ids []int64
		err := news.Insert(ctx, tx, rep, func(d Inserted) {
			ids = append(ids, d.ID)
			items = append(items, prelay.ReplayItem{DeliveryID: d.ID, WebhookID: "msg_" + d.EventID, Type: d.EventType, RecordedAt: d.Recorded})
		})
		if err != nil || len(ids) == 0 {
			return err
		}
		if err := AddToReplay(ctx, tx, rep, len(ids)); err != nil {
			return err
		}
		return enqueue(tx, ids)
	})
	if err != nil {
		return nil, fmt.Errorf("backfill: %w", err)
	}
	return items, nil
}
