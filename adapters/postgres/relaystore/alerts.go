package relaystore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	prelay "bookingledger/projections/relay"
)

// Streak is an endpoint's failure streak before an attempt changed it, and the alerts it sent.
type Streak struct {
	Failures, Alerted int
	// Ended: a success ended the streak.
	Ended bool
}

// EndStreak counts a success that ended at at: it moves the endpoint's latest success and ends its
// failure streak if the success ended after every failure counted in it. Only an endpoint with a
// streak, or whose recorded latest success is more than granularity older, is locked (false
// otherwise: nothing to do).
func EndStreak(ctx context.Context, tx pgx.Tx, ep int64, at time.Time, granularity time.Duration) (Streak, bool, error) {
	var s Streak
	err := tx.QueryRow(ctx, `UPDATE relay_endpoints e SET
  last_success_at = greatest(old.last_success_at, $2),
  consecutive_failures = CASE WHEN old.ends THEN 0 ELSE old.consecutive_failures END,
  alerted_failures = CASE WHEN old.ends THEN 0 ELSE old.alerted_failures END,
  last_failure_at = CASE WHEN old.ends THEN NULL ELSE old.last_failure_at END
FROM (SELECT id, consecutive_failures, alerted_failures, last_success_at, last_failure_at,
             consecutive_failures > 0 AND (last_failure_at IS NULL OR last_failure_at <= $2) AS ends
      FROM relay_endpoints
      WHERE id = $1 AND (consecutive_failures > 0 OR last_success_at IS NULL OR last_success_at < $2 - $3::interval) FOR NO KEY UPDATE) old
WHERE e.id = old.id
RETURNING old.consecutive_failures, old.alerted_failures, old.ends`, ep, at, granularity.String()).Scan(&s.Failures, &s.Alerted, &s.Ended)
	if errors.Is(err, pgx.ErrNoRows) {
		return Streak{}, false, nil
	}
	if err != nil {
		return Streak{}, false, fmt.Errorf("end failure streak: %w", err)
	}
	return s, true, nil
}

// CountFailure adds a failure that ended at at to the endpoint's streak and returns the streak after
// it; false when a later success was counted already (the failure is part of no streak).
func CountFailure(ctx context.Context, tx pgx.Tx, ep int64, at time.Time) (Streak, bool, error) {
	var s Streak
	err := tx.QueryRow(ctx, `UPDATE relay_endpoints SET consecutive_failures = consecutive_failures + 1,
  last_failure_at = greatest(last_failure_at, $2)
WHERE id = $1 AND (last_success_at IS NULL OR last_success_at < $2)
RETURNING consecutive_failures, alerted_failures`, ep, at).Scan(&s.Failures, &s.Alerted)
	if errors.Is(err, pgx.ErrNoRows) {
		return Streak{}, false, nil
	}
	if err != nil {
		return Streak{}, false, fmt.Errorf("count failure: %w", err)
	}
	return s, true, nil
}

// MarkAlerted records that the endpoint's streak alerted at failures.
func MarkAlerted(ctx context.Context, tx pgx.Tx, ep int64, failures int) error {
	if _, err := tx.Exec(ctx, `UPDATE relay_endpoints SET alerted_failures = $2 WHERE id = $1`, ep, failures); err != nil {
		return fmt.Errorf("mark alert: %w", err)
	}
	return nil
}

// InsertAlert records an alert (disabled: the relay disabled the endpoint after a sustained failure)
// and returns its ID and time.
func InsertAlert(ctx context.Context, tx pgx.Tx, ep int64, kind string, failures int, disabled bool) (int64, time.Time, error) {
	var (
		id int64
		at time.Time
	)
	if err := tx.QueryRow(ctx, `INSERT INTO relay_alerts (endpoint_id, kind, failures, error, disabled) VALUES ($1, $2, $3, '', $4)
RETURNING id, created_at`, ep, kind, failures, disabled).Scan(&id, &at); err != nil {
		return 0, time.Time{}, fmt.Errorf("insert alert: %w", err)
	}
	return id, at, nil
}

// Alerts lists an endpoint's alerts (every endpoint's when endpointID is 0), oldest first.
func (s *Store) Alerts(ctx context.Context, endpointID int64) ([]Alert, error) {
	rows, err := s.pool.Query(ctx, `SELECT a.id, a.endpoint_id, a.kind, a.failures, a.created_at, a.sent_at, a.error, e.url
FROM relay_alerts a JOIN relay_endpoints e ON e.id = a.endpoint_id
WHERE $1 = 0 OR a.endpoint_id = $1 ORDER BY a.id`, endpointID)
	if err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	defer rows.Close()
	var out []Alert
	for rows.Next() {
		var (
			a    Alert
			sent *time.Time
		)
		if err := rows.Scan(&a.ID, &a.EndpointID, &a.Kind, &a.Failures, &a.CreatedAt, &sent, &a.Error, &a.EndpointURL); err != nil {
			return nil, fmt.Errorf("list alerts: %w", err)
		}
		if sent != nil {
			a.SentAt = *sent
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// UnsentAlert is an alert to send, with its endpoint's description.
type UnsentAlert struct {
	Alert
	Description string
	// Disabled: the alert says the relay disabled the endpoint.
	Disabled bool
}

// LoadUnsentAlert returns an alert not sent yet; false when it was sent or its endpoint removed.
func (s *Store) LoadUnsentAlert(ctx context.Context, id int64) (UnsentAlert, bool, error) {
	var a UnsentAlert
	err := s.pool.QueryRow(ctx, `SELECT a.id, a.endpoint_id, a.kind, a.failures, a.created_at, e.url, e.description, a.disabled
FROM relay_alerts a JOIN relay_endpoints e ON e.id = a.endpoint_id WHERE a.id = $1 AND a.sent_at IS NULL`, id).Scan(
		&a.ID, &a.EndpointID, &a.Kind, &a.Failures, &a.CreatedAt, &a.EndpointURL, &a.Description, &a.Disabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return UnsentAlert{}, false, nil
	}
	if err != nil {
		return UnsentAlert{}, false, fmt.Errorf("load alert %d: %w", id, err)
	}
	return a, true, nil
}

// EarlierAlertOnItsWay reports whether the endpoint has an alert before id, decided within the last
// within, that is neither sent nor failing to send.
func (s *Store) EarlierAlertOnItsWay(ctx context.Context, ep, id int64, within time.Duration) (bool, error) {
	var earlier bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM relay_alerts WHERE endpoint_id = $1 AND id < $2
AND sent_at IS NULL AND error = '' AND created_at > now() - $3::interval)`, ep, id, within.String()).Scan(&earlier); err != nil {
		return false, fmt.Errorf("order alert %d: %w", id, err)
	}
	return earlier, nil
}

// AlertSent records an alert's send: sent when errText is empty, else its error.
func (s *Store) AlertSent(ctx context.Context, id int64, errText string) error {
	sql := `UPDATE relay_alerts SET sent_at = now(), error = '' WHERE id = $1`
	args := []any{id}
	if errText != "" {
		sql, args = `UPDATE relay_alerts SET error = $2 WHERE id = $1`, append(args, errText)
	}
	_, err := s.pool.Exec(ctx, sql, args...)
	return err
}

// InsertOperationalSend records one send of an operational event to target (nil: the alert URL),
// about an endpoint (nil: none), and returns its ID.
func InsertOperationalSend(ctx context.Context, tx pgx.Tx, webhookID, typ string, about, target *int64, at time.Time,
	text string, doc []byte) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, `INSERT INTO relay_operational_sends (webhook_id, type, about_endpoint, target_endpoint, at, text, data)
VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`, webhookID, typ, about, target, at, text, doc).Scan(&id)
	return id, err
}

// UnsentOperational is an operational send not sent yet and its target endpoint (nil URL: the alert
// URL's, or a removed endpoint's).
type UnsentOperational struct {
	WebhookID, Type, Text string
	At                    time.Time
	Data                  json.RawMessage
	Target                *int64
	URL, Secret, Previous *string
	Until                 *time.Time
}

// LoadUnsentOperational returns a send not sent yet; false when it was sent or its target removed.
func (s *Store) LoadUnsentOperational(ctx context.Context, id int64) (UnsentOperational, bool, error) {
	var o UnsentOperational
	err := s.pool.QueryRow(ctx, `SELECT s.webhook_id, s.type, s.at, s.text, s.data, s.target_endpoint,
    e.url, e.secret, e.previous_secret, e.previous_until
FROM relay_operational_sends s LEFT JOIN relay_endpoints e ON e.id = s.target_endpoint
WHERE s.id = $1 AND s.sent_at IS NULL`, id).Scan(&o.WebhookID, &o.Type, &o.At, &o.Text, &o.Data, &o.Target,
		&o.URL, &o.Secret, &o.Previous, &o.Until)
	if errors.Is(err, pgx.ErrNoRows) {
		return UnsentOperational{}, false, nil
	}
	if err != nil {
		return UnsentOperational{}, false, fmt.Errorf("load operational send %d: %w", id, err)
	}
	return o, true, nil
}

// OperationalSent records a send: sent when errText is empty, else its error.
func (s *Store) OperationalSent(ctx context.Context, id int64, errText string) error {
	sql := `UPDATE relay_operational_sends SET sent_at = now(), error = '' WHERE id = $1`
	args := []any{id}
	if errText != "" {
		sql, args = `UPDATE relay_operational_sends SET error = $2 WHERE id = $1`, append(args, errText)
	}
	_, err := s.pool.Exec(ctx, sql, args...)
	return err
}

// OperationalSends lists the recorded sends, oldest first.
func (s *Store) OperationalSends(ctx context.Context) ([]OperationalSend, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, webhook_id, type, coalesce(about_endpoint, 0), coalesce(target_endpoint, 0), at, text,
    coalesce(sent_at, 'epoch'), error FROM relay_operational_sends ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("operational sends: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (OperationalSend, error) {
		var s OperationalSend
		err := row.Scan(&s.ID, &s.WebhookID, &s.Type, &s.AboutEndpoint, &s.TargetEndpoint, &s.At, &s.Text, &s.SentAt, &s.Error)
		if s.SentAt.Equal(time.Unix(0, 0)) {
			s.SentAt = time.Time{}
		}
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("operational sends: %w", err)
	}
	return out, nil
}

// StreakAlert is an alert an attempt's count raised: its kind and the streak's failures.
type StreakAlert struct {
	Kind     string
	Failures int
}

// CountAttempt updates endpoint ep's failure streak with an attempt that ended at at and returns the
// alerts it raises: a success that ends a streak which had alerted, its one "recovered" (EndStreak,
// with granularity); a failure counted in the streak (CountFailure), a "failing" for each threshold
// it crosses (projections/relay.Crossed), each marked alerted.
func CountAttempt(ctx context.Context, tx pgx.Tx, ep int64, succeeded bool, at time.Time, granularity time.Duration) ([]StreakAlert, error) {
	if succeeded {
		s, ok, err := EndStreak(ctx, tx, ep, at, granularity)
		if err != nil || !ok || !s.Ended || s.Alerted == 0 {
			return nil, err // no streak to end, a later success known, or nothing alerted
		}
		return []StreakAlert{{Kind: AlertRecovered, Failures: s.Failures}}, nil
	}
	s, ok, err := CountFailure(ctx, tx, ep, at)
	if err != nil || !ok {
		return nil, err // older than a success already counted: not part of any streak
	}
	var out []StreakAlert
	for _, t := range prelay.Crossed(s.Failures, s.Alerted) {
		if err := MarkAlerted(ctx, tx, ep, t); err != nil {
			return nil, err
		}
		out = append(out, StreakAlert{Kind: AlertFailing, Failures: s.Failures})
	}
	return out, nil
}

// InsertOperational records, in tx, the sends of op: one to the alert URL (alertURL: one is
// configured) unless op excludes it, and one to every enabled endpoint subscribed to its type
// (OperationalTargets, projections/relay.Operational.Targets), with text as its stored text; it
// returns their IDs.
func InsertOperational(ctx context.Context, tx pgx.Tx, op prelay.Operational, alertURL bool, text string) ([]int64, error) {
	doc, err := op.Document()
	if err != nil {
		return nil, err
	}
	eps, err := OperationalTargets(ctx, tx, op.EndpointID)
	if err != nil {
		return nil, fmt.Errorf("operational %s: endpoints: %w", op.Type, err)
	}
	var about *int64
	if op.EndpointID != 0 {
		about = &op.EndpointID
	}
	var ids []int64
	for _, target := range op.Targets(alertURL, eps) {
		send, err := InsertOperationalSend(ctx, tx, op.ID, op.Type, about, target, op.At, text, doc)
		if err != nil {
			return nil, fmt.Errorf("operational %s: %w", op.Type, err)
		}
		ids = append(ids, send)
	}
	return ids, nil
}
