package relay

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInvalid is a request the relay refuses as it is (adapters/postgres/relaystore's too).
var ErrInvalid = errors.New("invalid request")

// ErrInvalidRate is a replay rate that is not a positive number of deliveries per second.
var ErrInvalidRate = errors.New("invalid replay rate")

// DefaultReplayRate is a replay's rate limit, in deliveries per second, when neither the replay nor
// the relay's configuration gives one: a quarter of what the relay's default 16 workers attempt at
// 16 ms each.
const DefaultReplayRate = 250.0

// ReplayShare is the share of a throttled endpoint's rate (--rate) a replay takes when it gives no
// rate of its own.
const ReplayShare = 0.5

// MaxReplayRate bounds a replay's rate.
const MaxReplayRate = 100_000.0

// ReplayQuery selects the deliveries of one endpoint whose events were recorded in [From, To).
type ReplayQuery struct {
	EndpointID int64
	From, To   time.Time
	// Types narrows the selection to matching event types (none: every type).
	Types []string
	// OnlyFailed selects dead deliveries only; otherwise succeeded and dead ones. Pending and paused
	// deliveries are never replayed: they are on their way already.
	OnlyFailed bool
	// DeliveryID narrows the selection to that one delivery (RetryDelivery); 0: every delivery.
	DeliveryID int64
	// Rate limits the replay's sends, in deliveries per second (0: the relay's ReplayRate).
	Rate float64
}

// Check validates q: an endpoint, a window, a rate and type patterns.
func (q ReplayQuery) Check() error {
	if q.EndpointID <= 0 {
		return fmt.Errorf("%w: an endpoint is required", ErrInvalid)
	}
	if q.From.IsZero() || q.To.IsZero() || !q.From.Before(q.To) {
		return fmt.Errorf("%w: from and to are required, from before to", ErrInvalid)
	}
	if err := CheckRate(q.Rate); err != nil {
		return err
	}
	return CheckTypes(q.Types)
}

// States are the delivery states q replays: dead ones, and succeeded ones unless OnlyFailed.
func (q ReplayQuery) States() []string {
	if q.OnlyFailed {
		return []string{StateDead}
	}
	return []string{StateSucceeded, StateDead}
}

// Backfills reports whether a replay also sends the window's events that have no delivery of the
// endpoint: a window replay does; a replay of failures, or of one delivery, sends what exists.
func (q ReplayQuery) Backfills() bool { return !q.OnlyFailed && q.DeliveryID == 0 }

// Covers reports whether an event recorded at at, of type typ, is in q's window and types; at is
// taken as the deliveries store it (microseconds).
func (q ReplayQuery) Covers(at time.Time, typ string) bool {
	at = at.Truncate(time.Microsecond)
	return !at.Before(q.From) && at.Before(q.To) && MatchTypes(q.Types, typ)
}

// RateOf is the rate a replay of q runs at: its own, else the relay's (relayRate), of which a
// throttled endpoint (endpointRate > 0) gives the replay only a share, the rest staying for live
// traffic.
func (q ReplayQuery) RateOf(endpointRate, relayRate float64) float64 {
	if q.Rate > 0 {
		return q.Rate
	}
	if endpointRate > 0 {
		return min(relayRate, endpointRate*ReplayShare)
	}
	return relayRate
}

// CheckRate validates a replay rate: more than 0 and at most MaxReplayRate deliveries per second, or
// 0 for the default.
func CheckRate(rate float64) error {
	if rate < 0 || math.IsNaN(rate) || math.IsInf(rate, 0) || rate > MaxReplayRate {
		return fmt.Errorf("%w: %v: want deliveries per second, more than 0 and at most %v (0: the default)", ErrInvalidRate, rate, MaxReplayRate)
	}
	return nil
}

// Pacer spaces a replay's jobs: the job of its k-th delivery is due k/Rate after Start, so the
// replay's sends average the rate whatever the backlog.
type Pacer struct {
	Start time.Time
	Rate  float64
	N     int
}

// Take returns when the job of the replay's next n deliveries is due, and counts them.
func (p *Pacer) Take(n int) time.Time {
	at := p.Start.Add(Duration(p.N, p.Rate))
	p.N += n
	return at
}
