package relay

import (
	"cmp"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Gate is what admitting a round's deliveries to one endpoint reads of it: its breaker and its
// throttle.
type Gate struct {
	// Failures is the endpoint's failure streak; the breaker is open once it reaches Threshold (0: no
	// breaker).
	Failures, Threshold int
	// Probe is the open breaker's probe (0: none); ProbeValid that it is pending and not held;
	// ProbeAt when it may go (zero: now).
	Probe      int64
	ProbeValid bool
	ProbeAt    time.Time
	// Rate is the endpoint's sends per second (0: unlimited); NextSlot its next free send slot.
	Rate     float64
	NextSlot time.Time
	// Backlog: the breaker holds deliveries.
	Backlog bool
}

// Open reports whether the gate's breaker is open.
func (g Gate) Open() bool { return g.Threshold > 0 && g.Failures >= g.Threshold }

// Admitted is a delivery of a round that goes now.
type Admitted struct {
	ID int64
	// NotBefore is its throttle slot (zero: none).
	NotBefore time.Time
	// Probe: it is the open breaker's probe protecting a backlog; its failure does not use up its
	// own schedule.
	Probe bool
}

// Admission is what Admit decides for an endpoint's deliveries of a round.
type Admission struct {
	Send []Admitted
	// Deferred get a job of their own due then; Held wait for the breaker to close, without a job.
	Deferred map[int64]time.Time
	Held     []int64
	// NewProbe is the breaker's probe from now (0: unchanged).
	NewProbe int64
	// Throttled: the endpoint's next free send slot is NextSlot.
	Throttled bool
	NextSlot  time.Time
}

// Admit applies an endpoint's breaker and rate to its deliveries of a round (ids, in id order) at
// now. Behind an open breaker only one probe goes (the valid probe, or the first delivery when there
// is none), when its ProbeAt has come, the rest are held; under a rate each delivery takes the next
// send slot, or, past window, is deferred to it.
func Admit(g Gate, ids []int64, now time.Time, window time.Duration) Admission {
	a := Admission{Deferred: map[int64]time.Time{}}
	candidates := make([]Admitted, 0, len(ids))
	if !g.Open() {
		for _, id := range ids {
			candidates = append(candidates, Admitted{ID: id})
		}
	} else {
		for _, id := range ids {
			if id != g.Probe && (g.ProbeValid || a.NewProbe != 0) {
				a.Held = append(a.Held, id)
				continue
			}
			a.NewProbe = id
			if !g.ProbeAt.After(now) {
				candidates = append(candidates, Admitted{ID: id, Probe: g.Backlog || len(a.Held) > 0 || len(ids) > 1})
			} else {
				a.Deferred[id] = g.ProbeAt
			}
		}
	}
	if g.Rate <= 0 || len(candidates) == 0 {
		a.Send = candidates
		return a
	}
	step := time.Duration(float64(time.Second) / g.Rate)
	start := now
	if g.NextSlot.After(start) {
		start = g.NextSlot
	}
	slot := start
	for _, c := range candidates {
		if slot.After(now.Add(window)) {
			a.Deferred[c.ID] = slot
		} else {
			c.NotBefore = slot
			a.Send = append(a.Send, c)
		}
		slot = slot.Add(step)
	}
	a.Throttled, a.NextSlot = true, start.Add(step*time.Duration(len(a.Send)))
	return a
}

// Schedule is the wait before each attempt of a delivery's run, each lengthened or shortened at
// random by up to Jitter (a fraction): its length is the number of attempts.
type Schedule struct {
	Waits  []time.Duration
	Jitter float64
}

// Wait returns the jittered wait before attempt n+1 of a run (n attempts done), and false when the
// schedule has no attempt n+1.
func (s Schedule) Wait(n int) (time.Duration, bool) {
	if n >= len(s.Waits) {
		return 0, false
	}
	d := s.Waits[n]
	if s.Jitter > 0 && d > 0 {
		d = time.Duration(float64(d) * (1 + s.Jitter*(2*rand.Float64()-1)))
	}
	return d, true
}

// ProbeWait is the wait before an open breaker's k-th probe: the schedule's k-th wait, its last one
// past its end; false for a schedule of fewer than two attempts.
func (s Schedule) ProbeWait(k int) (time.Duration, bool) {
	if len(s.Waits) < 2 {
		return 0, false
	}
	w, _ := s.Wait(min(k, len(s.Waits)-1))
	return w, true
}

// MaxRetryAfter bounds a receiver's Retry-After.
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads a Retry-After header's delay-seconds or HTTP date, bounded by MaxRetryAfter;
// 0 when absent.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		d = time.Duration(min(n, int64(MaxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return max(min(d, MaxRetryAfter), 0)
}

// RoundAttempt is an attempt of a round to one endpoint, as its breaker sees it.
type RoundAttempt struct {
	ID int64
	// Failed: the attempt failed; End is when it ended; RetryAfter when the receiver's Retry-After
	// lets the next one go.
	Failed          bool
	End, RetryAfter time.Time
	// Pending: the delivery goes on, Next being its next attempt's due time.
	Pending bool
	Next    time.Time
	// Protected: it went as the open breaker's probe protecting a backlog.
	Protected bool
}

// Breaker is an endpoint's failure streak and breaker, as recorded before a round's attempts are
// applied (after the streak counted them).
type Breaker struct {
	Failures, Threshold, Probes int
	// Since is when the failure streak began (zero: not recorded yet).
	Since time.Time
	// Probe is the breaker's probe (0: none), ProbeValid that it is pending and not held, ProbeAt
	// when it may go (zero: none).
	Probe      int64
	ProbeValid bool
	ProbeAt    time.Time
	// DisableAfter is how long a streak lasts before the endpoint is disabled (0: never).
	DisableAfter time.Duration
	Disabled     bool
}

// Open reports whether the breaker is open.
func (b Breaker) Open() bool { return b.Threshold > 0 && b.Failures >= b.Threshold }

// Breaker transitions (BreakerStep.Do).
const (
	// KeepBreaker: nothing changes (a streak, but no failure in the round).
	KeepBreaker = iota
	// CloseBreaker: the streak ended; what the breaker held is released.
	CloseBreaker
	// DisableEndpoint: the streak lasted DisableAfter; the endpoint is disabled.
	DisableEndpoint
	// CountStreak: the streak goes on below the threshold; it began at Since.
	CountStreak
	// OpenBreaker: one probe, the rest of the round's failures held.
	OpenBreaker
)

// BreakerStep is what a round's attempts do to an endpoint's breaker.
type BreakerStep struct {
	Do    int
	Since time.Time
	// Of an open breaker: Hold are the round's failures to hold; Probe the probe to schedule at At
	// (Protect: its attempt is given back to its schedule), or, with Promote, none yet: the oldest
	// held delivery becomes it, due at At. KeepProbe: the valid probe elsewhere stays as recorded.
	Hold      []int64
	Probe     int64
	At        time.Time
	Protect   bool
	Promote   bool
	KeepProbe bool
	Probes    int
}

// AfterRound applies a round's attempts to an endpoint's breaker: a streak that ended closes it; one
// failing for longer than DisableAfter disables the endpoint; below the threshold the streak is
// counted; at it, the breaker keeps one probe, paced by the schedule (the k-th probe waits its k-th
// wait), never before the probe's own due time, its ProbeAt or the receiver's Retry-After, and holds
// the round's other failures.
func AfterRound(b Breaker, round []RoundAttempt, s Schedule) BreakerStep {
	if b.Failures == 0 {
		return BreakerStep{Do: CloseBreaker}
	}
	var (
		failed              []RoundAttempt // still pending after a failure, in id order
		firstFail, lastFail time.Time
	)
	for _, a := range round {
		if !a.Failed {
			continue
		}
		if a.End.After(lastFail) {
			lastFail = a.End
		}
		if firstFail.IsZero() || a.End.Before(firstFail) {
			firstFail = a.End
		}
		if a.Pending {
			failed = append(failed, a)
		}
	}
	if lastFail.IsZero() {
		return BreakerStep{Do: KeepBreaker}
	}
	slices.SortFunc(failed, func(x, y RoundAttempt) int { return cmp.Compare(x.ID, y.ID) })
	step := BreakerStep{Since: b.Since, Probes: b.Probes}
	if step.Since.IsZero() {
		step.Since = firstFail
	}
	if b.DisableAfter > 0 && !b.Disabled && lastFail.Sub(step.Since) >= b.DisableAfter {
		step.Do = DisableEndpoint
		return step
	}
	if !b.Open() {
		step.Do = CountStreak
		return step
	}
	step.Do = OpenBreaker
	var (
		attempted  bool
		retryAfter time.Time
	)
	for _, a := range round {
		if b.Probe != 0 && a.ID == b.Probe {
			attempted, step.Protect, retryAfter = true, a.Protected, a.RetryAfter
		}
	}
	step.Protect = step.Protect && attempted
	if attempted {
		step.Probes++
	}
	var ownDue time.Time // a failure made the probe keeps its own due time (a Retry-After)
	switch {
	case attempted && b.ProbeValid:
		step.Probe = b.Probe // failed and still pending: it probes again
	case b.ProbeValid && !attempted:
		step.KeepProbe = true // the probe is elsewhere
	case len(failed) > 0:
		step.Probe, ownDue = failed[0].ID, failed[0].Next
	default:
		step.Promote = true
	}
	step.At = lastFail
	if w, ok := s.ProbeWait(step.Probes + 1); ok {
		step.At = lastFail.Add(w)
	}
	if ownDue.After(step.At) {
		step.At = ownDue // never attempted before its own due time
	}
	if !attempted && b.ProbeAt.After(step.At) {
		step.At = b.ProbeAt
	}
	if retryAfter.After(step.At) {
		step.At = retryAfter // the receiver's Retry-After
	}
	for _, a := range failed {
		if a.ID != step.Probe {
			step.Hold = append(step.Hold, a.ID)
		}
	}
	return step
}
