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
	"bookingledger/adapters/postgres/relaystore"
	prelay "bookingledger/projections/relay"
)

// AlertThresholds are the lengths of a failure streak at which an endpoint's alert is sent, each
// once per streak (projections/relay's).
var AlertThresholds = prelay.AlertThresholds

// Alert kinds.
const (
	AlertFailing   = relaystore.AlertFailing
	AlertRecovered = relaystore.AlertRecovered
	// AlertDisabled is the type suffix of the alert that the relay disabled an endpoint after a
	// sustained failure (stored as a failing alert marked disabled).
	AlertDisabled = prelay.AlertDisabled
)

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
	// A success locks only an endpoint with a streak, or whose recorded latest success is more than
	// successGranularity older (relaystore.EndStreak): with every success locking the endpoint's row
	// until its commit, all deliveries to one endpoint went one at a time. A failure that ended within
	// that granularity before an unrecorded success may still open a streak (ended by the next success).
	raised, err := relaystore.CountAttempt(ctx, tx, endpointID, succeeded, at, successGranularity)
	if err != nil {
		return nil, err
	}
	var notes []alertNote
	for _, a := range raised {
		msg := lastErr
		if a.Kind == AlertRecovered {
			msg = ""
		}
		n, err := r.insertAlert(ctx, tx, endpointID, a.Kind, a.Failures, msg)
		if err != nil {
			return nil, err
		}
		notes = append(notes, n)
	}
	return notes, nil
}

func (r *Relay) insertAlert(ctx context.Context, tx pgx.Tx, endpointID int64, kind string, failures int, lastErr string) (alertNote, error) {
	n := alertNote{endpointID: endpointID, kind: kind, failures: failures, lastError: lastErr}
	id, at, err := relaystore.InsertAlert(ctx, tx, endpointID, kind, failures, false)
	if err != nil {
		return alertNote{}, err
	}
	n.id = id
	// The endpoints subscribed to operational events get it as endpoint.failing or .recovered, with
	// the alert URL's webhook-id; the alert URL gets it by the alert's own job below.
	host, desc, err := endpointLabel(ctx, tx, endpointID)
	if err != nil {
		return alertNote{}, err
	}
	if err := r.RaiseOperational(ctx, tx, prelay.StreakAlert(n.id, kind, endpointID, host, desc, failures, at)); err != nil {
		return alertNote{}, err
	}
	return n, r.sendAlert(ctx, tx, n.id)
}

// sendAlert inserts the job that sends alert id to the alert URL, if there is one: ahead of the
// deliveries' backlog on the same queue (River fetches the highest priority first).
func (r *Relay) sendAlert(ctx context.Context, tx pgx.Tx, id int64) error {
	if r.alerts.URL == "" {
		return nil
	}
	return r.insertAlertJob(ctx, tx, AlertArgs{AlertID: id})
}

// insertAlertJob inserts an alert's or an operational event's job, ahead of the deliveries.
func (r *Relay) insertAlertJob(ctx context.Context, tx pgx.Tx, args river.JobArgs) error {
	if _, err := r.inserter.InsertTx(ctx, tx, args, &river.InsertOpts{Queue: Queue, MaxAttempts: alertJobAttempts,
		Priority: alertPriority}); err != nil {
		return fmt.Errorf("insert %s job: %w", args.Kind(), err)
	}
	return nil
}

// noteAlert logs and counts an alert that committed.
func (r *Relay) noteAlert(n alertNote) {
	r.metrics.Alert(strconv.FormatInt(n.endpointID, 10), n.kind)
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

// AlertMessage and AlertData are a standard alert's body (projections/relay's).
type (
	AlertMessage = prelay.AlertMessage
	AlertData    = prelay.AlertData
)

type alertWorker struct {
	river.WorkerDefaults[AlertArgs]
	r *Relay
}

func (w *alertWorker) Work(ctx context.Context, job *river.Job[AlertArgs]) error {
	r := w.r
	a, ok, err := r.store.LoadUnsentAlert(ctx, job.Args.AlertID)
	if err != nil || !ok {
		return err // sent already, or the endpoint was removed
	}
	if r.alerts.URL == "" {
		return nil // configured away since; the alert stays recorded and logged
	}
	// The endpoint's alerts go out in the order they were decided: an earlier one still on its way
	// (not failing to send) goes first.
	earlier, err := r.store.EarlierAlertOnItsWay(ctx, a.EndpointID, a.ID, alertOrderWait)
	if err != nil {
		return err
	}
	if earlier {
		return river.JobSnooze(100 * time.Millisecond)
	}
	typ, data := prelay.StoredAlert(a.Kind, a.Disabled, a.EndpointID, prelay.Host(a.EndpointURL), a.Description, a.Failures)
	sendErr := alerts.Send(ctx, r.client, r.alerts, alerts.Message{ID: prelay.AlertWebhookID(a.ID), Type: typ, At: a.CreatedAt,
		Text: data.Text, Data: data}, r.clock())
	if errors.Is(sendErr, alerts.ErrPermanent) {
		return river.JobCancel(sendErr)
	}
	if sendErr != nil {
		_ = r.store.AlertSent(ctx, a.ID, clipText(sendErr.Error()))
		return fmt.Errorf("send alert %d: %w", a.ID, sendErr)
	}
	if err := r.store.AlertSent(ctx, a.ID, ""); err != nil {
		return fmt.Errorf("mark alert %d sent: %w", a.ID, err)
	}
	return nil
}
