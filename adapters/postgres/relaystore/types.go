package relaystore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	prelay "bookingledger/projections/relay"
)

// Errors callers branch on.
var (
	ErrNotFound = errors.New("not found")
	ErrInvalid  = prelay.ErrInvalid
)

// Store runs the relay's statements that need no caller's transaction on its pool.
type Store struct {
	pool *pgxpool.Pool
}

// New returns the store of the relay tables in pool's database.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Delivery states (projections/relay's).
const (
	StatePending   = prelay.StatePending
	StatePaused    = prelay.StatePaused
	StateSucceeded = prelay.StateSucceeded
	StateDead      = prelay.StateDead
)

// States lists every delivery state: relay_deliveries.state's CHECK list (a test compares them).
var States = []string{StatePending, StatePaused, StateSucceeded, StateDead}

// Reasons the relay holds a pending delivery without a job (relay_deliveries.held).
const (
	HeldOrder   = "order"
	HeldBreaker = "breaker"
)

// HeldReasons are the values of relay_deliveries.held (its CHECK list).
var HeldReasons = []string{HeldOrder, HeldBreaker}

// Alert kinds.
const (
	AlertFailing   = "failing"
	AlertRecovered = "recovered"
)

// AlertKinds lists every alert kind: relay_alerts.kind's CHECK list (a test compares them).
var AlertKinds = []string{AlertFailing, AlertRecovered}

// Bounds of an endpoint's settings.
const (
	MaxRate            = 10000
	MaxConcurrency     = 1024
	MaxBreakerFailures = 1000
)

// Endpoint is a user's receiver. Its secrets are not part of it: they are shown once, when created or
// rotated.
type Endpoint struct {
	ID    int64
	URL   string
	Types []string
	// Filter narrows the types' events (the zero Filter: none); a change applies to the events
	// recorded after it.
	Filter      prelay.Filter
	Description string
	// Disabled is set by disable or by a 410 answer; DisabledReason says which.
	Disabled       bool
	DisabledAt     time.Time
	DisabledReason string
	// PreviousUntil is when the secret before the last rotation stops signing (zero: none).
	PreviousUntil       time.Time
	ConsecutiveFailures int
	CreatedAt           time.Time
	// Settings are how the endpoint is sent to: order, throttle, breaker.
	Settings
}

// BreakerOpen reports whether the endpoint's breaker is open: its failure streak reached
// BreakerFailures, so only one probe at a time is sent.
func (e Endpoint) BreakerOpen() bool {
	return e.BreakerFailures > 0 && e.ConsecutiveFailures >= e.BreakerFailures
}

// Rule is what the endpoint takes now: its types and filter.
func (e Endpoint) Rule() prelay.Rule {
	return prelay.Rule{Since: e.CreatedAt, Types: e.Types, Filter: e.Filter}
}

// Settings are how an endpoint is sent to (docs/relay.md, "Order, throttle and breaker").
type Settings struct {
	// Ordered: a booking's messages reach the endpoint in stream-version order.
	Ordered bool
	// RatePerSecond and Concurrency throttle the endpoint (0: unlimited). Concurrency counts the
	// attempts in flight of one serve instance.
	RatePerSecond float64
	Concurrency   int
	// BreakerFailures is the failure streak that opens the breaker (0: no breaker).
	BreakerFailures int
	// DisableAfter is how long a failure streak lasts before the endpoint is disabled (0: never).
	DisableAfter time.Duration
	// AutoDisabled: the relay disabled the endpoint after a sustained failure.
	AutoDisabled bool
	// FailingSince is when the current failure streak began (zero: none); ProbeAt when the open
	// breaker's next probe may go (zero: none).
	FailingSince, ProbeAt time.Time
}

// SettingsUpdate changes an endpoint's delivery settings; a nil field keeps its value (AddEndpoint:
// takes its default).
type SettingsUpdate struct {
	Ordered         *bool
	RatePerSecond   *float64
	Concurrency     *int
	BreakerFailures *int
	DisableAfter    *time.Duration
}

// Args checks u and returns the statement arguments of its fields (nil: keep), for InsertEndpoint
// and UpdateEndpoint.
func (u SettingsUpdate) Args() ([]any, error) {
	out := make([]any, 5)
	if u.Ordered != nil {
		out[0] = *u.Ordered
	}
	if u.RatePerSecond != nil {
		v := *u.RatePerSecond
		if math.IsNaN(v) || v < 0 || v > MaxRate {
			return nil, fmt.Errorf("%w: rate must be 0 (unlimited) to %d per second", ErrInvalid, MaxRate)
		}
		out[1] = v
	}
	if u.Concurrency != nil {
		if *u.Concurrency < 0 || *u.Concurrency > MaxConcurrency {
			return nil, fmt.Errorf("%w: concurrency must be 0 (unlimited) to %d", ErrInvalid, MaxConcurrency)
		}
		out[2] = int32(*u.Concurrency)
	}
	if u.BreakerFailures != nil {
		if *u.BreakerFailures < 0 || *u.BreakerFailures > MaxBreakerFailures {
			return nil, fmt.Errorf("%w: breaker failures must be 0 (no breaker) to %d", ErrInvalid, MaxBreakerFailures)
		}
		out[3] = int32(*u.BreakerFailures)
	}
	if u.DisableAfter != nil {
		d := *u.DisableAfter
		if d != 0 && (d < time.Second || d > 365*24*time.Hour) {
			return nil, fmt.Errorf("%w: disable-after must be 0 (never) or 1s to 8760h", ErrInvalid)
		}
		out[4] = d.Milliseconds()
	}
	return out, nil
}

// NewEndpoint is what AddEndpoint needs.
type NewEndpoint struct {
	URL         string
	Types       []string
	Filter      prelay.Filter
	Description string
	// Options are the delivery settings; nil fields take their defaults.
	Options SettingsUpdate
}

// Check validates n, its URL by checkURL (the relay's guard, which returns the URL to store), then
// its types, filter, description and settings; it returns n with the checked URL.
func (n NewEndpoint) Check(checkURL func(string) (string, error)) (NewEndpoint, error) {
	var err error
	if n.URL, err = checkURL(n.URL); err != nil {
		return n, err
	}
	if err := prelay.CheckTypes(n.Types); err != nil {
		return n, err
	}
	if err := n.Filter.Check(); err != nil {
		return n, err
	}
	if err := prelay.CheckDescription(n.Description); err != nil {
		return n, err
	}
	_, err = n.Options.Args()
	return n, err
}

// EndpointUpdate changes an endpoint; a nil field keeps its value, and Types pointing at an empty
// list means every type.
type EndpointUpdate struct {
	URL         *string
	Types       *[]string
	Filter      *prelay.Filter
	Description *string
	// Options change the delivery settings given.
	Options SettingsUpdate
}

// Check validates u: something to change, its settings, its URL by checkURL (as NewEndpoint.Check),
// its types, filter and description; it returns u with the checked URL.
func (u EndpointUpdate) Check(checkURL func(string) (string, error)) (EndpointUpdate, error) {
	if u.URL == nil && u.Types == nil && u.Filter == nil && u.Description == nil && u.Options == (SettingsUpdate{}) {
		return u, fmt.Errorf("%w: nothing to change (give a url, types, a filter, a description or a delivery setting)", ErrInvalid)
	}
	if _, err := u.Options.Args(); err != nil {
		return u, err
	}
	if u.URL != nil {
		v, err := checkURL(*u.URL)
		if err != nil {
			return u, err
		}
		u.URL = &v
	}
	if u.Types != nil {
		if err := prelay.CheckTypes(*u.Types); err != nil {
			return u, err
		}
	}
	if u.Filter != nil {
		if err := u.Filter.Check(); err != nil {
			return u, err
		}
	}
	if u.Description != nil {
		if err := prelay.CheckDescription(*u.Description); err != nil {
			return u, err
		}
	}
	return u, nil
}

// Delivery is one event for one endpoint.
type Delivery struct {
	ID            int64
	EndpointID    int64
	EventID       string
	WebhookID     string
	Booking       string
	Stream        string
	Version       uint64
	Type          string
	RecordedAt    time.Time
	State         string
	Attempts      int
	ReplayID      int64
	NextAttemptAt time.Time
	LastStatus    int
	LastError     string
	CreatedAt     time.Time
	CompletedAt   time.Time
}

// Attempt is one recorded attempt of a delivery.
type Attempt struct {
	N         int
	At        time.Time
	Status    int // 0: no response
	LatencyMS float64
	Succeeded bool
	Response  string
	Error     string
	// ReplayID is the replay the attempt belongs to (0: the delivery's first run).
	ReplayID int64
}

// DeliveryQuery filters Deliveries; zero fields match everything.
type DeliveryQuery struct {
	EndpointID int64
	State      string
	// Booking lists one booking's deliveries in order: by endpoint, then stream version (the order an
	// ordered endpoint gets them), the first ones first.
	Booking string
	// Limit bounds the rows, newest first (DefaultDeliveryLimit when zero).
	Limit int
}

// DefaultDeliveryLimit bounds a listing.
const DefaultDeliveryLimit = 100

// Backlog is what an endpoint has waiting.
type Backlog struct {
	// Pending counts the deliveries on their way, HeldOrder and HeldBreaker those of them held
	// (behind an earlier version; behind the open breaker); Paused those kept while disabled.
	Pending, HeldOrder, HeldBreaker, Paused int
	// OldestPending is when the oldest pending delivery was planned (zero: none).
	OldestPending time.Time
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

// Replay is a started replay and its progress.
type Replay struct {
	ID         int64
	EndpointID int64
	Total      int
	Succeeded  int
	Dead       int
	Pending    int
	CreatedAt  time.Time
}

// Done reports whether every delivery of the replay finished.
func (r Replay) Done() bool { return r.Succeeded+r.Dead >= r.Total }

// Querier runs a query on a pool or in a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func collectIDs(rows pgx.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// deref is *p, or the zero value for nil.
func deref[T any](p *T) T {
	var v T
	if p != nil {
		v = *p
	}
	return v
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Retryable reports whether err is PostgreSQL rolling a transaction back to let another one go on
// (deadlock_detected 40P01, serialization_failure 40001): run the same transaction again. The relay's
// transactions lock deliveries and endpoints in an order their callers choose (a round's deliveries,
// then its endpoints; an admission's earlier versions, then the endpoint), so two of them can wait on
// each other and PostgreSQL breaks the cycle by failing one.
func Retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// RetryTries bounds how often Retried runs a transaction again after PostgreSQL rolled it back to
// break a deadlock.
const RetryTries = 5

// Retried runs the transaction run again while PostgreSQL rolls it back to break a deadlock
// (Retryable), at most RetryTries times, a little later each time. The relay records a round of
// attempts this way: failing the job instead would make River run it again and send the round's
// deliveries a second time, the accepted ones included.
func Retried(run func() error) error {
	var err error
	for try := 1; try <= RetryTries; try++ {
		if err = run(); !Retryable(err) {
			return err
		}
		time.Sleep(time.Duration(try) * 10 * time.Millisecond)
	}
	return err
}
