package relay

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bookingledger/adapters/postgres/relaystore"
	"bookingledger/adapters/providers/standard"
	prelay "bookingledger/projections/relay"
)

// Errors callers branch on.
var (
	ErrNotFound      = relaystore.ErrNotFound
	ErrInvalidTypes  = prelay.ErrInvalidTypes
	ErrInvalidFilter = prelay.ErrInvalidFilter
	ErrInvalid       = relaystore.ErrInvalid
)

// RotationOverlap is how long a rotated-out secret keeps signing alongside the new one, so receivers
// can switch at their own pace.
const RotationOverlap = 24 * time.Hour

// The relay's value types are its store's (adapters/postgres/relaystore).
type (
	Endpoint        = relaystore.Endpoint
	NewEndpoint     = relaystore.NewEndpoint
	EndpointUpdate  = relaystore.EndpointUpdate
	Settings        = relaystore.Settings
	SettingsUpdate  = relaystore.SettingsUpdate
	Delivery        = relaystore.Delivery
	Attempt         = relaystore.Attempt
	DeliveryQuery   = relaystore.DeliveryQuery
	Backlog         = relaystore.Backlog
	Alert           = relaystore.Alert
	OperationalSend = relaystore.OperationalSend
	Replay          = relaystore.Replay
)

// Delivery states (relaystore.States).
const (
	StatePending   = relaystore.StatePending
	StatePaused    = relaystore.StatePaused
	StateSucceeded = relaystore.StateSucceeded
	StateDead      = relaystore.StateDead
)

// States, HeldReasons and AlertKinds are the CHECK lists of relay_deliveries and relay_alerts.
var (
	States      = relaystore.States
	HeldReasons = relaystore.HeldReasons
	AlertKinds  = relaystore.AlertKinds
)

// DefaultDeliveryLimit bounds a listing.
const DefaultDeliveryLimit = relaystore.DefaultDeliveryLimit

// ParseTypes splits a comma-separated filter ("booking.scheduled.*, booking.payment_*") into
// patterns; empty means every type.
func ParseTypes(s string) ([]string, error) { return prelay.ParseTypes(s) }

// CheckTypes validates type patterns (projections/relay.CheckTypes).
func CheckTypes(patterns []string) error { return prelay.CheckTypes(patterns) }

// MatchTypes reports whether an event type passes the patterns (none: every type).
func MatchTypes(patterns []string, eventType string) bool {
	return prelay.MatchTypes(patterns, eventType)
}

// Filter narrows an endpoint's events by provider, resource and booking status after the event
// (docs/relay.md, "Filters").
type Filter = prelay.Filter

// ParseFilter reads the filter syntax ("provider=calcom|acuity,status=active,resource=room-a").
func ParseFilter(s string) (Filter, error) { return prelay.ParseFilter(s) }

// NewSecret returns a fresh Standard Webhooks secret: "whsec_" and the base64 of 24 random bytes.
func NewSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return standard.SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// AddEndpoint validates and stores an endpoint and returns it with its secret, which is not shown
// again. The URL must pass the guard.
func (r *Relay) AddEndpoint(ctx context.Context, n NewEndpoint) (Endpoint, string, error) {
	n, err := n.Check(r.checkURL(ctx))
	if err != nil {
		return Endpoint{}, "", err
	}
	secret := NewSecret()
	e, err := r.store.InsertEndpoint(ctx, n, secret)
	if err != nil {
		return Endpoint{}, "", fmt.Errorf("add endpoint: %w", err)
	}
	return e, secret, nil
}

// checkURL checks an endpoint URL with the guard and returns it as stored.
func (r *Relay) checkURL(ctx context.Context) func(string) (string, error) {
	return func(raw string) (string, error) {
		u, err := r.guard.CheckURL(ctx, raw)
		if err != nil {
			return "", err
		}
		return u.String(), nil
	}
}

// UpdateEndpoint changes an endpoint's URL, types, filter or description, each checked as AddEndpoint
// checks it. Deliveries not yet sent go to the new URL (each attempt reads it), so an endpoint that
// moved keeps its secret, its deliveries and their webhook-ids; new types and a new filter apply to
// the events recorded from now on (a replay covers the past). Its state, failure streak and secrets
// stay.
func (r *Relay) UpdateEndpoint(ctx context.Context, id int64, u EndpointUpdate) (Endpoint, error) {
	u, err := u.Check(r.checkURL(ctx))
	if err != nil {
		return Endpoint{}, err
	}
	var e Endpoint
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		var err error
		e, err = relaystore.UpdateEndpoint(ctx, tx, id, u)
		if err != nil {
			return err
		}
		if err := r.settingsChanged(ctx, tx, e); err != nil {
			return err
		}
		if u.Types == nil && u.Filter == nil {
			return nil
		}
		return relaystore.AddRule(ctx, tx, id, "now()")
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, fmt.Errorf("endpoint %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("update endpoint %d: %w", id, err)
	}
	return e, nil
}

// DisableEndpoint stops sending to an endpoint: its pending deliveries pause when their turn comes,
// and new events are kept as paused deliveries until EnableEndpoint.
func (r *Relay) DisableEndpoint(ctx context.Context, id int64, reason string) (Endpoint, error) {
	var e Endpoint
	err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		var err error
		e, err = r.disable(ctx, tx, id, reason)
		return err
	})
	return e, err
}

// disable disables an endpoint in tx and, when it was enabled, raises endpoint.disabled.
func (r *Relay) disable(ctx context.Context, tx pgx.Tx, id int64, reason string) (Endpoint, error) {
	e, was, err := relaystore.Disable(ctx, tx, id, reason)
	if err != nil {
		return Endpoint{}, err
	}
	if !was {
		if err := r.RaiseEndpointDisabled(ctx, tx, id, reason); err != nil {
			return Endpoint{}, fmt.Errorf("disable endpoint %d: %w", id, err)
		}
	}
	return e, nil
}

// EnableEndpoint resumes an endpoint: every paused delivery is scheduled again (a fresh run of the
// retry schedule) and its failure streak starts over — except those of an endpoint the relay disabled
// after a sustained failure, which stay paused until EnableAndSendMissed. It returns the endpoint and
// how many deliveries resumed.
func (r *Relay) EnableEndpoint(ctx context.Context, id int64) (Endpoint, int, error) {
	return r.enable(ctx, id, false)
}

// RotateSecret gives an endpoint a new secret and returns it (shown once); the current one keeps
// signing alongside it for RotationOverlap. A secret rotated out earlier is dropped.
func (r *Relay) RotateSecret(ctx context.Context, id int64) (Endpoint, string, error) {
	secret := NewSecret()
	e, err := r.store.RotateSecret(ctx, id, secret, RotationOverlap)
	if err != nil {
		return Endpoint{}, "", err
	}
	return e, secret, nil
}
