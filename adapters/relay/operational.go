package relay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"bookingledger/adapters/alerts"
	prelay "bookingledger/projections/relay"
)

// Operational event types (adapters/alerts): what the alert URL and the endpoints subscribed to
// "operational.*" receive.
const (
	OpEndpointFailing              = alerts.TypeEndpointFailing
	OpEndpointRecovered            = alerts.TypeEndpointRecovered
	OpEndpointDisabled             = alerts.TypeEndpointDisabled
	OpDeliveryDead                 = alerts.TypeDeliveryDead
	OpProviderSubscriptionDisabled = alerts.TypeProviderSubscriptionDisabled
	OpProviderMissedWebhooks       = alerts.TypeProviderMissedWebhooks
	OpProviderSyncFailed           = alerts.TypeProviderSyncFailed
)

// Operational is one occurrence of an operational event.
type Operational struct {
	// ID is the webhook-id every target receives it with ("" : a new one).
	ID   string
	Type string
	// EndpointID is the endpoint it is about (0: none, a provider's); that endpoint never receives it.
	EndpointID int64
	At         time.Time
	// Text is the sentence the Slack format sends; Data the event's document, "text" added.
	Text string
	Data map[string]any
	// ExceptAlertURL leaves the alert URL out: its raiser sends there itself (the failure streak's
	// relay_alerts, the provider sync's provider_alerts).
	ExceptAlertURL bool
}

// OpArgs is the job that sends one operational event to one target.
type OpArgs struct {
	SendID int64 `json:"send_id"`
}

// Kind is River's name of the job.
func (OpArgs) Kind() string { return "bookingledger.relay_operational" }

// RaiseOperational records op, in tx, once for the alert URL (if configured and not excluded) and
// once for every enabled endpoint subscribed to its type (projections/relay.TakesOperational), with
// the jobs that send each once. The sender of endpoint.disabled for any path that disables an
// endpoint is RaiseEndpointDisabled.
func (r *Relay) RaiseOperational(ctx context.Context, tx pgx.Tx, op Operational) error {
	if op.ID == "" {
		op.ID = "op_" + uuid.NewString()
	}
	if op.At.IsZero() {
		op.At = r.clock()
	}
	data := map[string]any{}
	for k, v := range op.Data {
		data[k] = v
	}
	data["text"] = op.Text
	doc, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("operational %s: %w", op.Type, err)
	}
	rows, err := tx.Query(ctx, `SELECT id, types FROM relay_endpoints WHERE disabled_at IS NULL AND id <> $1 ORDER BY id`, op.EndpointID)
	if err != nil {
		return fmt.Errorf("operational %s: endpoints: %w", op.Type, err)
	}
	var targets []*int64
	if r.alerts.URL != "" && !op.ExceptAlertURL {
		targets = append(targets, nil)
	}
	var (
		id    int64
		types []string
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &types}, func() error {
		if prelay.TakesOperational(types, op.Type) {
			target := id
			targets = append(targets, &target)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("operational %s: endpoints: %w", op.Type, err)
	}
	var about *int64
	if op.EndpointID != 0 {
		about = &op.EndpointID
	}
	for _, target := range targets {
		var send int64
		if err := tx.QueryRow(ctx, `INSERT INTO relay_operational_sends (webhook_id, type, about_endpoint, target_endpoint, at, text, data)
VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`, op.ID, op.Type, about, target, op.At, clipText(op.Text), doc).Scan(&send); err != nil {
			return fmt.Errorf("operational %s: %w", op.Type, err)
		}
		if _, err := r.inserter.InsertTx(ctx, tx, OpArgs{SendID: send}, &river.InsertOpts{Queue: Queue,
			MaxAttempts: alertJobAttempts, Priority: alertPriority}); err != nil {
			return fmt.Errorf("operational %s: job: %w", op.Type, err)
		}
	}
	return nil
}

// RaiseEndpointDisabled raises endpoint.disabled for an endpoint that tx has just disabled (by
// disable, a 410 answer or a circuit breaker), with why. Call it in the transaction that disabled
// it, once per disable (not for an endpoint that was disabled already).
func (r *Relay) RaiseEndpointDisabled(ctx context.Context, tx pgx.Tx, endpointID int64, reason string) error {
	reason = cmp.Or(reason, "disabled by an operator")
	host, desc, err := endpointLabel(ctx, tx, endpointID)
	if err != nil {
		return err
	}
	return r.RaiseOperational(ctx, tx, Operational{Type: OpEndpointDisabled, EndpointID: endpointID,
		Text: fmt.Sprintf("bookingledger relay: endpoint %d (%s) disabled: %s", endpointID, host, reason),
		Data: map[string]any{"endpoint": endpointID, "url": host, "description": desc, "reason": reason}})
}

// raiseDead raises delivery.dead for a delivery whose schedule ran out.
func (r *Relay) raiseDead(ctx context.Context, tx pgx.Tx, s sent) error {
	host, desc, err := endpointLabel(ctx, tx, s.d.endpointID)
	if err != nil {
		return err
	}
	webhookID := "msg_" + s.d.eventID
	return r.RaiseOperational(ctx, tx, Operational{Type: OpDeliveryDead, EndpointID: s.d.endpointID,
		Text: fmt.Sprintf("bookingledger relay: delivery %d (%s) to endpoint %d (%s) is dead after %d attempt(s): %s",
			s.d.id, webhookID, s.d.endpointID, host, s.d.attempts+1, s.a.err),
		Data: map[string]any{"endpoint": s.d.endpointID, "url": host, "description": desc, "delivery": s.d.id,
			"webhook_id": webhookID, "stream": s.d.stream, "version": s.d.version, "attempts": s.d.attempts + 1,
			"last_error": s.a.err}})
}

// endpointLabel is what an operational event says of an endpoint: its host (the path and query may
// hold the receiver's own token) and description.
func endpointLabel(ctx context.Context, tx pgx.Tx, id int64) (host, desc string, err error) {
	var url string
	if err := tx.QueryRow(ctx, `SELECT url, description FROM relay_endpoints WHERE id = $1`, id).Scan(&url, &desc); err != nil {
		return "", "", fmt.Errorf("endpoint %d: %w", id, err)
	}
	host = url
	if u, err := ParseURL(url); err == nil {
		host = u.Host
	}
	return host, desc, nil
}

type opWorker struct {
	river.WorkerDefaults[OpArgs]
	r *Relay
}

// Work sends one operational event to its target: the alert URL in its format, or an endpoint as a
// Standard Webhooks message signed with the endpoint's secrets. Sent once: a send already recorded
// is not repeated.
func (w *opWorker) Work(ctx context.Context, job *river.Job[OpArgs]) error {
	r := w.r
	var (
		m           alerts.Message
		target      *int64
		data        json.RawMessage
		url, secret *string
		previous    *string
		until       *time.Time
	)
	err := r.pool.QueryRow(ctx, `SELECT s.webhook_id, s.type, s.at, s.text, s.data, s.target_endpoint,
    e.url, e.secret, e.previous_secret, e.previous_until
FROM relay_operational_sends s LEFT JOIN relay_endpoints e ON e.id = s.target_endpoint
WHERE s.id = $1 AND s.sent_at IS NULL`, job.Args.SendID).Scan(&m.ID, &m.Type, &m.At, &m.Text, &data, &target,
		&url, &secret, &previous, &until)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // sent already, or its target was removed
	}
	if err != nil {
		return fmt.Errorf("load operational send %d: %w", job.Args.SendID, err)
	}
	m.Data = data
	var sendErr error
	switch {
	case target == nil && r.alerts.URL == "":
		return nil // configured away since; the occurrence stays recorded
	case target == nil:
		sendErr = alerts.Send(ctx, r.client, r.alerts, m, r.clock())
	case url == nil:
		return nil // the endpoint was removed
	default:
		now := r.clock()
		sendErr = alerts.SendSigned(ctx, r.client, *url, m, now, activeSecrets(*secret, previous, until, now)...)
	}
	if sendErr != nil {
		_, _ = r.pool.Exec(ctx, `UPDATE relay_operational_sends SET error = $2 WHERE id = $1`, job.Args.SendID, clipText(sendErr.Error()))
		if errors.Is(sendErr, alerts.ErrPermanent) {
			return river.JobCancel(sendErr)
		}
		return fmt.Errorf("send operational %s %s: %w", m.Type, m.ID, sendErr)
	}
	if _, err := r.pool.Exec(ctx, `UPDATE relay_operational_sends SET sent_at = now(), error = '' WHERE id = $1`, job.Args.SendID); err != nil {
		return fmt.Errorf("mark operational send %d sent: %w", job.Args.SendID, err)
	}
	return nil
}

// OperationalSend is a recorded send of an operational event.
type OperationalSend struct {
	ID             int64
	WebhookID      string
	Type           string
	AboutEndpoint  int64
	TargetEndpoint int64 // 0: the alert URL
	At             time.Time
	Text           string
	SentAt         time.Time
	Error          string
}

// OperationalSends lists the recorded sends, oldest first.
func (r *Relay) OperationalSends(ctx context.Context) ([]OperationalSend, error) {
	rows, err := r.pool.Query(ctx, `SELECT id, webhook_id, type, coalesce(about_endpoint, 0), coalesce(target_endpoint, 0), at, text,
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
