package relay

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Delivery states (relay_deliveries.state; adapters/postgres/relaystore stores them).
const (
	StatePending   = "pending"
	StatePaused    = "paused"
	StateSucceeded = "succeeded"
	StateDead      = "dead"
)

// Outcomes of an attempt, as stored and as the metrics' outcome label.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	// OutcomeGone: the receiver answered 410; the endpoint is disabled.
	OutcomeGone = "gone"
)

// DefaultSchedule is the wait before each attempt of a delivery: the first goes out at once, the last
// about 33 hours after the event.
var DefaultSchedule = []time.Duration{0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// DefaultJitter is the fraction by which each wait is randomly lengthened or shortened, so that the
// retries of many deliveries that failed together do not arrive together.
const DefaultJitter = 0.1

// NewSchedule is the schedule of waits (DefaultSchedule when empty) with jitter (DefaultJitter when
// zero, none when negative, at most 1); a negative wait is an error.
func NewSchedule(waits []time.Duration, jitter float64) (Schedule, error) {
	if len(waits) == 0 {
		waits = DefaultSchedule
	}
	if slices.ContainsFunc(waits, func(d time.Duration) bool { return d < 0 }) {
		return Schedule{}, errors.New("schedule has a negative wait")
	}
	if jitter == 0 {
		jitter = DefaultJitter
	}
	return Schedule{Waits: waits, Jitter: max(min(jitter, 1), 0)}, nil
}

// Attempt is the outcome of one send of a delivery.
type Attempt struct {
	At         time.Time
	Status     int // 0: no response
	Latency    time.Duration
	Response   string
	Err        string
	RetryAfter time.Duration
	Outcome    string
}

// End is when the attempt ended.
func (a Attempt) End() time.Time { return a.At.Add(a.Latency) }

// Answered classifies the receiver's answer of an attempt made at a.At: a 2xx succeeded, a 410 is
// gone (the endpoint is disabled), anything else failed; a 429's or 503's Retry-After is kept.
func (a Attempt) Answered(status int, response, retryAfter string) Attempt {
	a.Status, a.Response = status, response
	switch {
	case status >= 200 && status < 300:
		a.Outcome = OutcomeSucceeded
	case status == http.StatusGone:
		a.Outcome, a.Err = OutcomeGone, "410 Gone: endpoint disabled"
	default:
		a.Outcome, a.Err = OutcomeFailed, fmt.Sprintf("HTTP %d", status)
		if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
			a.RetryAfter = ParseRetryAfter(retryAfter, a.At)
		}
	}
	return a
}

// Next decides what an attempt leads to, the runAttempt-th of the delivery's run: its state and,
// while it is pending, the wait and due time of its next attempt. A probe's failure does not use up
// the schedule (AfterRound sets its due time); a failure past the schedule's end is dead.
func (s Schedule) Next(a Attempt, runAttempt int, probe bool) (state string, wait time.Duration, next time.Time) {
	switch a.Outcome {
	case "":
		return StatePending, 0, time.Time{}
	case OutcomeSucceeded:
		return StateSucceeded, 0, time.Time{}
	case OutcomeGone:
		return StatePaused, 0, time.Time{}
	}
	w, ok := s.Wait(runAttempt + 1)
	if probe {
		w, ok = s.Wait(max(min(runAttempt, len(s.Waits)-1), 0))
	}
	if !ok {
		return StateDead, 0, time.Time{}
	}
	wait = max(w, a.RetryAfter)
	return StatePending, wait, a.At.Add(wait)
}

// StreakAttempt is a round's attempt as its endpoint's failure streak counts it.
type StreakAttempt struct {
	Endpoint int64
	Attempt  Attempt
	// Kept: its delivery was updated by the round (not removed or paused meanwhile).
	Kept bool
}

// StreakOrder returns the indexes of the round's kept attempts in the order the streaks count them:
// by endpoint (two rounds lock the endpoints in one order), each endpoint's attempts in the order
// they ended; count is false for a success right after a kept success of its endpoint, which ends
// no streak (one statement for a run of them).
func StreakOrder(round []StreakAttempt) (order []int, count []bool) {
	idx := make([]int, len(round))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(i, j int) int {
		a, b := round[i], round[j]
		return cmp.Or(cmp.Compare(a.Endpoint, b.Endpoint), a.Attempt.End().Compare(b.Attempt.End()))
	})
	for k, i := range idx {
		if !round[i].Kept {
			continue
		}
		s := round[i]
		after := k > 0 && round[idx[k-1]].Kept && round[idx[k-1]].Endpoint == s.Endpoint &&
			round[idx[k-1]].Attempt.Outcome == OutcomeSucceeded
		ok := !(after && s.Attempt.Outcome == OutcomeSucceeded)
		order, count = append(order, i), append(count, ok)
	}
	return order, count
}

// ByEndpoint groups items by their endpoint, the endpoints in the order they first appear: a job's
// deliveries are one endpoint's.
func ByEndpoint[T any](items []T, endpoint func(T) int64) [][]T {
	at := map[int64]int{}
	var groups [][]T
	for _, it := range items {
		ep := endpoint(it)
		i, ok := at[ep]
		if !ok {
			i, at[ep] = len(groups), len(groups)
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], it)
	}
	return groups
}
