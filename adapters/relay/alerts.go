package relay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"bookingledger/adapters/alerts"
)

// AlertThresholds are the lengths of a failure streak at which an endpoint's alert is sent, each
// once per streak.
var AlertThresholds = []int{1, 5, 20}

// Alert kinds.
const (
	AlertFailing   = "failing"
	AlertRecovered = "recovered"
	// AlertDisabled is the type suffix of the alert that the relay disabled an endpoint after a
	// sustained failure (stored as a failing alert marked disabled).
	AlertDisabled = "disabled"
)

// AlertKinds lists every alert kind: relay_alerts.kind's CHECK list (a test compares them).
var AlertKinds = []string{AlertFailing, AlertRecovered}

// AlertFormat selects the body of alerts (adapters/alerts).
const (
	AlertFormatStandard = alerts.FormatStandard
	AlertFormatSlack    = alerts.FormatSlack
)

// alertJobAttempts bounds the sends of one alert.
const alertJobAttempts = 10

// River priorities on the relay's queue (1 is fetched first): an alert goes out ahead of the
// deliveries waiting behind a recovered endpoint.
const (
	alertPriority    = 1
	deliveryPriority = 2
)

// successGranularity is how stale an endpoint's recorded latest success may be while no streak is
// open (see streak).
const successGranularity = 100 * time.Millisecond

// alertOrderWait bounds how long an alert waits for an earlier unsent alert of its endpoint: the
// channel hears an endpoint's alerts in the order they were decided, unless an earlier one keeps
// failing to send.
const alertOrderWait = 10 * time.Minute

// AlertConfig says where alerts go besides the log and the metrics: the one alert channel, shared with
// the provider sync's alerts.
type AlertConfig = alerts.Config

// CheckAlerts validates c: a URL the relay may post to, a known format, and a secret for standard
// alerts.
func CheckAlerts(c AlertConfig) error {
	if c.URL == "" {
		return nil
	}
	if _, err := ParseURL(c.URL); err != nil {
		return fmt.Errorf("alert url: %w", err)
	}
	return c.Check()
}

// alertNote is an alert decided in a transaction, logged and counted once it committed.
type alertNote struct {
	id         int64
	endpointID int64
	kind       string
	failures   int
	lastError  string
	// disabled: the relay disabled the endpoint after a sustained failure (breaker.go).
	disabled bool
}

// streak updates an endpoint's failure streak with an attempt that ended at at, and records the
// alerts it crosses. The streak follows the attempts' times, not the order their rounds commit
// (concurrent jobs commit out of attempt order): a failure that ended before the latest counted
// success is history and counts for nothing; a success ends the streak only when it ended after
// every failure counted in it, and then sends the streak's one "recovered" (if it had alerted). A
// success older than a counted failure only moves last_success_at. The endpoint row is locked by
// the update, so concurrent attempts count one after the other and each threshold is crossed by
// exactly one of them.
func (r *Relay) streak(ctx context.Context, tx pgx.Tx, endpointID int64, succeeded bool, lastErr string, at time.Time) ([]alertNote, error) {
	var notes []alertNote
	if succeeded {
		var failures, alerted int
		var ended bool
		// Only an endpoint with a streak, or whose recorded latest success is more than
		// successGranularity older, is locked: with every success locking the endpoint's row until its
		// commit, all deliveries to one endpoint went one at a time. A failure that ended within that
		// granularity before an unrecorded success may still open a streak (ended by the next success).
		err := tx.QueryRow(ctx, `UPDATE relay_endpoints e SET
  last_success_at = greatest(old.last_success_at, $2),
  consecutive_failures = CASE WHEN old.ends THEN 0 ELSE old.consecutive_failures END,
  alerted_failures = CASE WHEN old.ends THEN 0 ELSE old.alerted_failures END,
  last_failure_at = CASE WHEN old.ends THEN NULL ELSE old.last_failure_at END
FROM (SELECT id, consecutive_failures, alerted_failures, last_success_at, last_failure_at,
             consecutive_failures > 0 AND (last_failure_at IS NULL OR last_failure_at <= $2) AS ends
      FROM relay_endpoints
      WHERE id = $1 AND (consecutive_failures > 0 OR last_success_at IS NULL OR last_success_at < $2 - $3::interval) FOR UPDATE) old
WHERE e.id = old.id
RETURNING old.consecutive_failures, old.alerted_failures, old.ends`, endpointID, at, successGranularity.String()).Scan(&failures, &alerted, &ended)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil // no streak to end, and a later success known
		}
		if err != nil {
			return nil, fmt.Errorf("end failure streak: %w", err)
		}
		if ended && alerted > 0 {
			n, err := r.insertAlert(ctx, tx, endpointID, AlertRecovered, failures, "")
			if err != nil {
				return nil, err
			}
			notes = append(notes, n)
		}
		return notes, nil
	}
	var failures, alerted int
	err := tx.QueryRow(ctx, `UPDATE relay_endpoints SET consecutive_failures = consecutive_failures + 1,
  last_failure_at = greatest(last_failure_at, $2)
WHERE id = $1 AND (last_success_at IS NULL OR last_success_at < $2)
RETURNING consecutive_failures, alerted_failures`, endpointID, at).Scan(&failures, &alerted)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil // older than a success already counted: not part of any streak
	}
	if err != nil {
		return nil, fmt.Errorf("count failure: %w", err)
	}
	for _, t := range AlertThresholds {
		if failures == t && alerted < t {
			if _, err := tx.Exec(ctx, `UPDATE relay_endpoints SET alerted_failures = $2 WHERE id = $1`, endpointID, t); err != nil {
				return nil, fmt.Errorf("mark alert: %w", err)
			}
			n, err := r.insertAlert(ctx, tx, endpointID, AlertFailing, failures, lastErr)
			if err != nil {
				return nil, err
			}
			notes = append(notes, n)
		}
	}
	return notes, nil
}

func (r *Relay) insertAlert(ctx context.Context, tx pgx.Tx, endpointID int64, kind string, failures int, lastErr string) (alertNote, error) {
	n := alertNote{endpointID: endpointID, kind: kind, failures: failures, lastError: lastErr}
	if err := tx.QueryRow(ctx, `INSERT INTO relay_alerts (endpoint_id, kind, failures, error) VALUES ($1, $2, $3, '') RETURNING id`,
		endpointID, kind, failures).Scan(&n.id); err != nil {
		return alertNote{}, fmt.Errorf("insert alert: %w", err)
	}
	// The endpoints subscribed to operational events get it as endpoint.failing or .recovered, with
	// the alert URL's webhook-id; the alert URL gets it by the alert's own job below.
	host, desc, err := endpointLabel(ctx, tx, endpointID)
	if err != nil {
		return alertNote{}, err
	}
	var at time.Time
	if err := tx.QueryRow(ctx, `SELECT created_at FROM relay_alerts WHERE id = $1`, n.id).Scan(&at); err != nil {
		return alertNote{}, fmt.Errorf("insert alert: %w", err)
	}
	if err := r.RaiseOperational(ctx, tx, Operational{ID: alertWebhookID(n.id), Type: "endpoint." + kind, EndpointID: endpointID,
		At: at, Text: alertText(kind, endpointID, host, failures), ExceptAlertURL: true,
		Data: map[string]any{"endpoint": endpointID, "url": host, "description": desc, "consecutive_failures": failures}}); err != nil {
		return alertNote{}, err
	}
	if r.alerts.URL == "" {
		return n, nil
	}
	// Ahead of the deliveries' backlog on the same queue: River fetches the highest priority first.
	if _, err := r.inserter.InsertTx(ctx, tx, AlertArgs{AlertID: n.id}, &river.InsertOpts{Queue: Queue, MaxAttempts: alertJobAttempts,
		Priority: alertPriority}); err != nil {
		return alertNote{}, fmt.Errorf("insert alert job: %w", err)
	}
	return n, nil
}

// alertText is the sentence of a failure streak's alert.
func alertText(kind string, endpoint int64, host string, failures int) string {
	if kind == AlertRecovered {
		return fmt.Sprintf("bookingledger relay: endpoint %d (%s) recovered after %d consecutive failure(s)", endpoint, host, failures)
	}
	return fmt.Sprintf("bookingledger relay: endpoint %d (%s) failed %d time(s) in a row", endpoint, host, failures)
}

// disabledText is the sentence of the alert that the relay disabled an endpoint after a sustained
// failure.
func disabledText(endpoint int64, host string, failures int) string {
	return fmt.Sprintf("bookingledger relay: endpoint %d (%s) disabled after failing %d time(s) in a row for too long; "+
		"its events wait as paused deliveries until 'bookingledger endpoints enable %d --send-missed'", endpoint, host, failures, endpoint)
}

// alertWebhookID is the webhook-id of a failure streak's alert, the same for every target.
func alertWebhookID(id int64) string { return "alert_" + strconv.FormatInt(id, 10) }

// noteAlert logs and counts an alert that committed.
func (r *Relay) noteAlert(n alertNote) {
	r.metrics.alert(strconv.FormatInt(n.endpointID, 10), n.kind)
	if n.disabled {
		r.log.Warn("relay endpoint disabled after a sustained failure", "endpoint", n.endpointID, "consecutive_failures", n.failures,
			"reason", n.lastError, "alert", n.id)
		return
	}
	if n.kind == AlertRecovered {
		r.log.Warn("relay endpoint recovered", "endpoint", n.endpointID, "failures", n.failures, "alert", n.id)
		return
	}
	r.log.Warn("relay endpoint failing", "endpoint", n.endpointID, "consecutive_failures", n.failures,
		"last_error", n.lastError, "alert", n.id)
}

// Alert is a recorded alert.
type Alert struct {
	ID          int64
	EndpointID  int64
	Kind        string
	Failures    int
	CreatedAt   time.Time
	SentAt      time.Time
	Error       string
	EndpointURL string
}

// Alerts lists an endpoint's alerts (every endpoint's when endpointID is 0), oldest first.
func (r *Relay) Alerts(ctx context.Context, endpointID int64) ([]Alert, error) {
	rows, err := r.pool.Query(ctx, `SELECT a.id, a.endpoint_id, a.kind, a.failures, a.created_at, a.sent_at, a.error, e.url
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

// AlertMessage is the data of a standard alert.
type AlertMessage struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      AlertData `json:"data"`
}

// AlertData describes the endpoint and its streak.
type AlertData struct {
	Endpoint            int64  `json:"endpoint"`
	URL                 string `json:"url"`
	Description         string `json:"description,omitempty"`
	ConsecutiveFailures int    `json:"consecutive_failures"`
	Text                string `json:"text"`
}

type alertWorker struct {
	river.WorkerDefaults[AlertArgs]
	r *Relay
}

func (w *alertWorker) Work(ctx context.Context, job *river.Job[AlertArgs]) error {
	r := w.r
	var (
		a        Alert
		desc     string
		disabled bool
	)
	err := r.pool.QueryRow(ctx, `SELECT a.id, a.endpoint_id, a.kind, a.failures, a.created_at, e.url, e.description, a.disabled
FROM relay_alerts a JOIN relay_endpoints e ON e.id = a.endpoint_id WHERE a.id = $1 AND a.sent_at IS NULL`, job.Args.AlertID).Scan(
		&a.ID, &a.EndpointID, &a.Kind, &a.Failures, &a.CreatedAt, &a.EndpointURL, &desc, &disabled)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // sent already, or the endpoint was removed
	}
	if err != nil {
		return fmt.Errorf("load alert %d: %w", job.Args.AlertID, err)
	}
	if r.alerts.URL == "" {
		return nil // configured away since; the alert stays recorded and logged
	}
	// The endpoint's alerts go out in the order they were decided: an earlier one still on its way
	// (not failing to send) goes first.
	var earlier bool
	if err := r.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM relay_alerts WHERE endpoint_id = $1 AND id < $2
AND sent_at IS NULL AND error = '' AND created_at > now() - $3::interval)`, a.EndpointID, a.ID, alertOrderWait.String()).Scan(&earlier); err != nil {
		return fmt.Errorf("order alert %d: %w", a.ID, err)
	}
	if earlier {
		return river.JobSnooze(100 * time.Millisecond)
	}
	host := a.EndpointURL
	if u, err := ParseURL(a.EndpointURL); err == nil {
		host = u.Host // the path and query may hold the receiver's own token
	}
	text := alertText(a.Kind, a.EndpointID, host, a.Failures)
	kind := a.Kind
	if disabled {
		kind, text = AlertDisabled, disabledText(a.EndpointID, host, a.Failures)
	}
	sendErr := alerts.Send(ctx, r.client, r.alerts, alerts.Message{
		ID: alertWebhookID(a.ID), Type: "endpoint." + kind, At: a.CreatedAt, Text: text,
		Data: AlertData{Endpoint: a.EndpointID, URL: host, Description: desc, ConsecutiveFailures: a.Failures, Text: text},
	}, r.clock())
	if errors.Is(sendErr, alerts.ErrPermanent) {
		return river.JobCancel(sendErr)
	}
	if sendErr != nil {
		_, _ = r.pool.Exec(ctx, `UPDATE relay_alerts SET error = $2 WHERE id = $1`, a.ID, clipText(sendErr.Error()))
		return fmt.Errorf("send alert %d: %w", a.ID, sendErr)
	}
	if _, err := r.pool.Exec(ctx, `UPDATE relay_alerts SET sent_at = now(), error = '' WHERE id = $1`, a.ID); err != nil {
		return fmt.Errorf("mark alert %d sent: %w", a.ID, err)
	}
	return nil
}
