package relay

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// The relay's operational event types (also adapters/alerts' names of them).
const (
	TypeEndpointFailing   = "endpoint.failing"
	TypeEndpointRecovered = "endpoint.recovered"
	TypeEndpointDisabled  = "endpoint.disabled"
	TypeDeliveryDead      = "delivery.dead"
)

// AlertRecovered is the kind of the alert that ends a failure streak; "failing" the others.
const AlertRecovered = "recovered"

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

// AlertWebhookID is the webhook-id of a failure streak's alert, the same for every target.
func AlertWebhookID(id int64) string { return "alert_" + strconv.FormatInt(id, 10) }

// AlertText is the sentence of a failure streak's alert of kind ("failing" or "recovered").
func AlertText(kind string, endpoint int64, host string, failures int) string {
	if kind == AlertRecovered {
		return fmt.Sprintf("bookingledger relay: endpoint %d (%s) recovered after %d consecutive failure(s)", endpoint, host, failures)
	}
	return fmt.Sprintf("bookingledger relay: endpoint %d (%s) failed %d time(s) in a row", endpoint, host, failures)
}

// DisabledText is the sentence of the alert that the relay disabled an endpoint after a sustained
// failure.
func DisabledText(endpoint int64, host string, failures int) string {
	return fmt.Sprintf("bookingledger relay: endpoint %d (%s) disabled after failing %d time(s) in a row for too long; "+
		"its events wait as paused deliveries until 'bookingledger endpoints enable %d --send-missed'", endpoint, host, failures, endpoint)
}

// StreakAlert is endpoint.failing or endpoint.recovered for the endpoints subscribed to operational
// events, with the alert's webhook-id (the alert URL gets the alert by its own job).
func StreakAlert(alertID int64, kind string, ep int64, host, desc string, failures int, at time.Time) Operational {
	return Operational{ID: AlertWebhookID(alertID), Type: "endpoint." + kind, EndpointID: ep, At: at,
		Text: AlertText(kind, ep, host, failures), ExceptAlertURL: true,
		Data: map[string]any{"endpoint": ep, "url": host, "description": desc, "consecutive_failures": failures}}
}

// SustainedDisable is endpoint.disabled of an endpoint the relay disabled after a sustained failure,
// with its alert's webhook-id.
func SustainedDisable(alertID, ep int64, host, desc string, failures int, reason string, at time.Time) Operational {
	return Operational{ID: AlertWebhookID(alertID), Type: TypeEndpointDisabled, EndpointID: ep, At: at,
		Text: DisabledText(ep, host, failures), ExceptAlertURL: true,
		Data: map[string]any{"endpoint": ep, "url": host, "description": desc, "consecutive_failures": failures, "reason": reason}}
}

// EndpointDisabled is endpoint.disabled of an endpoint disabled for reason (an operator's, a 410).
func EndpointDisabled(ep int64, host, desc, reason string) Operational {
	return Operational{Type: TypeEndpointDisabled, EndpointID: ep,
		Text: fmt.Sprintf("bookingledger relay: endpoint %d (%s) disabled: %s", ep, host, reason),
		Data: map[string]any{"endpoint": ep, "url": host, "description": desc, "reason": reason}}
}

// DeadDelivery is what a dead delivery's delivery.dead says of it.
type DeadDelivery struct {
	ID, Endpoint int64
	EventID      string
	Stream       string
	Version      uint64
	Attempts     int
	LastError    string
}

// DeliveryDead is delivery.dead of a delivery whose schedule ran out.
func DeliveryDead(d DeadDelivery, host, desc string) Operational {
	webhookID := "msg_" + d.EventID
	return Operational{Type: TypeDeliveryDead, EndpointID: d.Endpoint,
		Text: fmt.Sprintf("bookingledger relay: delivery %d (%s) to endpoint %d (%s) is dead after %d attempt(s): %s",
			d.ID, webhookID, d.Endpoint, host, d.Attempts, d.LastError),
		Data: map[string]any{"endpoint": d.Endpoint, "url": host, "description": desc, "delivery": d.ID,
			"webhook_id": webhookID, "stream": d.Stream, "version": d.Version, "attempts": d.Attempts,
			"last_error": d.LastError}}
}

// AlertThresholds are the lengths of a failure streak at which an endpoint's alert is sent, each
// once per streak.
var AlertThresholds = []int{1, 5, 20}

// AlertDisabled is the type suffix of the alert that the relay disabled an endpoint after a
// sustained failure (stored as a failing alert marked disabled).
const AlertDisabled = "disabled"

// Crossed returns the thresholds a streak of failures crosses that its alerts (alerted: the highest
// threshold alerted) have not: each is alerted once per streak.
func Crossed(failures, alerted int) []int {
	var out []int
	for _, t := range AlertThresholds {
		if failures == t && alerted < t {
			out = append(out, t)
		}
	}
	return out
}

// SustainedFailureReason starts the disabled reason of an endpoint the relay disabled after a
// sustained failure.
const SustainedFailureReason = "failing for longer than"

// SustainedReason is the disabled reason of an endpoint that failed failures times in a row for
// longer than after.
func SustainedReason(after time.Duration, failures int) string {
	return fmt.Sprintf("%s %s: disabled by the relay after %d consecutive failures", SustainedFailureReason, after, failures)
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

// StoredAlert is what the alert URL's message of a recorded alert says: its type and text, from its
// kind, whether it disabled the endpoint, and the endpoint's host (never its path or query).
func StoredAlert(kind string, disabled bool, ep int64, host, desc string, failures int) (typ string, data AlertData) {
	text := AlertText(kind, ep, host, failures)
	if disabled {
		kind, text = AlertDisabled, DisabledText(ep, host, failures)
	}
	return "endpoint." + kind, AlertData{Endpoint: ep, URL: host, Description: desc, ConsecutiveFailures: failures, Text: text}
}

// Subscriber is an enabled endpoint with its type patterns, as operational events find it.
type Subscriber struct {
	ID    int64
	Types []string
}

// Targets are the receivers of op: the alert URL (nil) when there is one (alertURL) and op does not
// leave it out, then each endpoint of eps subscribed to op's type (TakesOperational).
func (op Operational) Targets(alertURL bool, eps []Subscriber) []*int64 {
	var targets []*int64
	if alertURL && !op.ExceptAlertURL {
		targets = append(targets, nil)
	}
	for _, ep := range eps {
		if TakesOperational(ep.Types, op.Type) {
			targets = append(targets, &ep.ID)
		}
	}
	return targets
}

// Document is op's data as its targets receive it, with "text" added.
func (op Operational) Document() ([]byte, error) {
	data := map[string]any{}
	for k, v := range op.Data {
		data[k] = v
	}
	data["text"] = op.Text
	doc, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("operational %s: %w", op.Type, err)
	}
	return doc, nil
}
