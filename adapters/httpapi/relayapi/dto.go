package relayapi

import (
	"time"

	"bookingledger/adapters/relay"
)

// EndpointDTO is an endpoint without its secrets.
type EndpointDTO struct {
	ID    int64    `json:"id"`
	URL   string   `json:"url"`
	Types []string `json:"types"`
	// Filter is the endpoint's filter in its syntax ("provider=calcom,status=active"); "" : none.
	Filter              string     `json:"filter"`
	Description         string     `json:"description"`
	State               string     `json:"state"`
	DisabledAt          *time.Time `json:"disabled_at,omitempty"`
	DisabledReason      string     `json:"disabled_reason,omitempty"`
	PreviousSecretUntil *time.Time `json:"previous_secret_until,omitempty"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	CreatedAt           time.Time  `json:"created_at"`
	// The delivery settings (docs/relay.md, "Order, throttle and breaker").
	Ordered         bool    `json:"ordered"`
	RatePerSecond   float64 `json:"rate_per_second"`
	Concurrency     int     `json:"concurrency"`
	BreakerFailures int     `json:"breaker_failures"`
	// DisableAfter is a Go duration ("120h0m0s"; "0s": never).
	DisableAfter string `json:"disable_after"`
	// Breaker is "closed", "open" (one probe at a time) or "off" (no breaker).
	Breaker      string     `json:"breaker"`
	FailingSince *time.Time `json:"failing_since,omitempty"`
	NextProbeAt  *time.Time `json:"next_probe_at,omitempty"`
	AutoDisabled bool       `json:"auto_disabled,omitempty"`
}

// BreakerState names an endpoint's breaker: "off", "open" or "closed".
func BreakerState(e relay.Endpoint) string {
	switch {
	case e.BreakerFailures == 0:
		return "off"
	case e.BreakerOpen():
		return "open"
	default:
		return "closed"
	}
}

// EndpointSecretDTO answers add and rotate-secret: the only time the secret is shown.
type EndpointSecretDTO struct {
	Endpoint EndpointDTO `json:"endpoint"`
	Secret   string      `json:"secret"`
}

// EndpointsDTO lists endpoints.
type EndpointsDTO struct {
	Endpoints []EndpointDTO `json:"endpoints"`
}

// EnableDTO answers enable.
type EnableDTO struct {
	Endpoint EndpointDTO `json:"endpoint"`
	Resumed  int         `json:"resumed"`
}

// DeliveryDTO is one delivery.
type DeliveryDTO struct {
	ID            int64        `json:"id"`
	Endpoint      int64        `json:"endpoint"`
	WebhookID     string       `json:"webhook_id"`
	Event         string       `json:"event"`
	Type          string       `json:"type"`
	Booking       string       `json:"booking"`
	Stream        string       `json:"stream"`
	Version       uint64       `json:"version"`
	RecordedAt    time.Time    `json:"recorded_at"`
	State         string       `json:"state"`
	Attempts      int          `json:"attempts"`
	Replay        int64        `json:"replay,omitempty"`
	NextAttemptAt *time.Time   `json:"next_attempt_at,omitempty"`
	LastStatus    int          `json:"last_status,omitempty"`
	LastError     string       `json:"last_error,omitempty"`
	CompletedAt   *time.Time   `json:"completed_at,omitempty"`
	AttemptLog    []AttemptDTO `json:"attempt_log,omitempty"`
}

// AttemptDTO is one attempt.
type AttemptDTO struct {
	Attempt   int       `json:"attempt"`
	At        time.Time `json:"at"`
	Status    int       `json:"status,omitempty"`
	LatencyMS float64   `json:"latency_ms"`
	Succeeded bool      `json:"succeeded"`
	Response  string    `json:"response,omitempty"`
	Error     string    `json:"error,omitempty"`
	Replay    int64     `json:"replay,omitempty"`
}

// DeliveriesDTO lists deliveries.
type DeliveriesDTO struct {
	Deliveries []DeliveryDTO `json:"deliveries"`
}

// ReplayRequest is the body of POST /api/admin/endpoints/{id}/replay.
type ReplayRequest struct {
	From       time.Time `json:"from"`
	To         time.Time `json:"to"`
	Types      []string  `json:"types,omitempty"`
	OnlyFailed bool      `json:"only_failed,omitempty"`
	// Rate is the replay's rate limit in deliveries per second (0: the default).
	Rate   float64 `json:"rate,omitempty"`
	DryRun bool    `json:"dry_run,omitempty"`
}

// TypeCountDTO counts one type of a plan.
type TypeCountDTO struct {
	Type  string `json:"type"`
	Count int    `json:"count"`
}

// ReplayItemDTO names a delivery in a plan.
type ReplayItemDTO struct {
	Delivery   int64     `json:"delivery"`
	WebhookID  string    `json:"webhook_id"`
	Type       string    `json:"type"`
	RecordedAt time.Time `json:"recorded_at"`
}

// PlanDTO is what a replay sends.
type PlanDTO struct {
	Total  int            `json:"total"`
	ByType []TypeCountDTO `json:"by_type"`
	First  *ReplayItemDTO `json:"first,omitempty"`
	Last   *ReplayItemDTO `json:"last,omitempty"`
	// Rate is the replay's rate limit (deliveries per second); DurationSeconds how long sending
	// Total takes at it, at least.
	Rate            float64 `json:"rate"`
	DurationSeconds float64 `json:"duration_seconds"`
}

// ReplayDTO is a replay's progress.
type ReplayDTO struct {
	ID        int64     `json:"id"`
	Endpoint  int64     `json:"endpoint"`
	Total     int       `json:"total"`
	Succeeded int       `json:"succeeded"`
	Dead      int       `json:"dead"`
	Pending   int       `json:"pending"`
	Done      bool      `json:"done"`
	CreatedAt time.Time `json:"created_at"`
}

// ReplayStartedDTO answers a real replay.
type ReplayStartedDTO struct {
	Replay ReplayDTO `json:"replay"`
	Plan   PlanDTO   `json:"plan"`
}

// AlertDTO is one alert.
type AlertDTO struct {
	ID        int64      `json:"id"`
	Endpoint  int64      `json:"endpoint"`
	Kind      string     `json:"kind"`
	Failures  int        `json:"failures"`
	CreatedAt time.Time  `json:"created_at"`
	SentAt    *time.Time `json:"sent_at,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// AlertsDTO lists alerts.
type AlertsDTO struct {
	Alerts []AlertDTO `json:"alerts"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// ToEndpoint converts an endpoint.
func ToEndpoint(e relay.Endpoint) EndpointDTO {
	state := "enabled"
	if e.Disabled {
		state = "disabled"
	}
	until := e.PreviousUntil
	if !until.After(time.Now()) {
		until = time.Time{}
	}
	return EndpointDTO{ID: e.ID, URL: e.URL, Types: e.Types, Filter: e.Filter.String(), Description: e.Description, State: state,
		DisabledAt: timePtr(e.DisabledAt), DisabledReason: e.DisabledReason, PreviousSecretUntil: timePtr(until),
		ConsecutiveFailures: e.ConsecutiveFailures, CreatedAt: e.CreatedAt.UTC(),
		Ordered: e.Ordered, RatePerSecond: e.RatePerSecond, Concurrency: e.Concurrency, BreakerFailures: e.BreakerFailures,
		DisableAfter: e.DisableAfter.String(), Breaker: BreakerState(e), FailingSince: timePtr(e.FailingSince),
		NextProbeAt: timePtr(e.ProbeAt), AutoDisabled: e.AutoDisabled}
}

// ToDelivery converts a delivery and, if given, its attempts.
func ToDelivery(d relay.Delivery, attempts []relay.Attempt) DeliveryDTO {
	out := DeliveryDTO{ID: d.ID, Endpoint: d.EndpointID, WebhookID: d.WebhookID, Event: d.EventID, Type: d.Type,
		Booking: d.Booking, Stream: d.Stream, Version: d.Version, RecordedAt: d.RecordedAt.UTC(), State: d.State,
		Attempts: d.Attempts, Replay: d.ReplayID, NextAttemptAt: timePtr(d.NextAttemptAt), LastStatus: d.LastStatus,
		LastError: d.LastError, CompletedAt: timePtr(d.CompletedAt)}
	for _, a := range attempts {
		out.AttemptLog = append(out.AttemptLog, AttemptDTO{Attempt: a.N, At: a.At.UTC(), Status: a.Status, LatencyMS: a.LatencyMS,
			Succeeded: a.Succeeded, Response: a.Response, Error: a.Error, Replay: a.ReplayID})
	}
	return out
}

// ToDeliveries converts a listing.
func ToDeliveries(ds []relay.Delivery) DeliveriesDTO {
	out := DeliveriesDTO{Deliveries: make([]DeliveryDTO, len(ds))}
	for i, d := range ds {
		out.Deliveries[i] = ToDelivery(d, nil)
	}
	return out
}

func toItem(it *relay.ReplayItem) *ReplayItemDTO {
	if it == nil {
		return nil
	}
	return &ReplayItemDTO{Delivery: it.DeliveryID, WebhookID: it.WebhookID, Type: it.Type, RecordedAt: it.RecordedAt.UTC()}
}

// ToPlan converts a replay plan.
func ToPlan(p relay.ReplayPlan) PlanDTO {
	out := PlanDTO{Total: p.Total, ByType: make([]TypeCountDTO, len(p.ByType)), First: toItem(p.First), Last: toItem(p.Last),
		Rate: p.Rate, DurationSeconds: p.Duration.Seconds()}
	for i, tc := range p.ByType {
		out.ByType[i] = TypeCountDTO{Type: tc.Type, Count: tc.Count}
	}
	return out
}

// ToReplay converts a replay's progress.
func ToReplay(r relay.Replay) ReplayDTO {
	return ReplayDTO{ID: r.ID, Endpoint: r.EndpointID, Total: r.Total, Succeeded: r.Succeeded, Dead: r.Dead,
		Pending: r.Pending, Done: r.Done(), CreatedAt: r.CreatedAt.UTC()}
}

// ToAlerts converts alerts.
func ToAlerts(as []relay.Alert) AlertsDTO {
	out := AlertsDTO{Alerts: make([]AlertDTO, len(as))}
	for i, a := range as {
		out.Alerts[i] = AlertDTO{ID: a.ID, Endpoint: a.EndpointID, Kind: a.Kind, Failures: a.Failures,
			CreatedAt: a.CreatedAt.UTC(), SentAt: timePtr(a.SentAt), Error: a.Error}
	}
	return out
}
