package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"bookingledger/adapters/alerts"
	"bookingledger/adapters/postgres/relaystore"
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

// Operational is one occurrence of an operational event (projections/relay builds the relay's).
type Operational = prelay.Operational

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
	sends, err := relaystore.InsertOperational(ctx, tx, op, r.alerts.URL != "", clipText(op.Text))
	if err != nil {
		return err
	}
	for _, send := range sends {
		if err := r.insertAlertJob(ctx, tx, OpArgs{SendID: send}); err != nil {
			return fmt.Errorf("operational %s: %w", op.Type, err)
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
	return r.RaiseOperational(ctx, tx, prelay.EndpointDisabled(endpointID, host, desc, reason))
}

// raiseDead raises delivery.dead for a delivery whose schedule ran out.
func (r *Relay) raiseDead(ctx context.Context, tx pgx.Tx, s sent) error {
	host, desc, err := endpointLabel(ctx, tx, s.d.EndpointID)
	if err != nil {
		return err
	}
	return r.RaiseOperational(ctx, tx, prelay.DeliveryDead(prelay.DeadDelivery{ID: s.d.ID, Endpoint: s.d.EndpointID,
		EventID: s.d.EventID, Stream: s.d.Stream, Version: s.d.Version, Attempts: s.d.Attempts + 1, LastError: s.a.Err}, host, desc))
}

// endpointLabel is what an operational event says of an endpoint: its host (the path and query may
// hold the receiver's own token) and description.
func endpointLabel(ctx context.Context, tx pgx.Tx, id int64) (host, desc string, err error) {
	url, desc, err := relaystore.EndpointLabel(ctx, tx, id)
	return prelay.Host(url), desc, err
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
	o, ok, err := r.store.LoadUnsentOperational(ctx, job.Args.SendID)
	if err != nil || !ok {
		return err // sent already, or its target was removed
	}
	m := alerts.Message{ID: o.WebhookID, Type: o.Type, At: o.At, Text: o.Text, Data: o.Data}
	target, url := o.Target, o.URL
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
		sendErr = alerts.SendSigned(ctx, r.client, *url, m, now, prelay.ActiveSecrets(*o.Secret, o.Previous, o.Until, now)...)
	}
	if sendErr != nil {
		_ = r.store.OperationalSent(ctx, job.Args.SendID, clipText(sendErr.Error()))
		if errors.Is(sendErr, alerts.ErrPermanent) {
			return river.JobCancel(sendErr)
		}
		return fmt.Errorf("send operational %s %s: %w", m.Type, m.ID, sendErr)
	}
	if err := r.store.OperationalSent(ctx, job.Args.SendID, ""); err != nil {
		return fmt.Errorf("mark operational send %d sent: %w", job.Args.SendID, err)
	}
	return nil
}
