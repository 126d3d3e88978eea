package relay

import (
	"net/http"
	"testing"
	"time"
)

var t0 = time.Date(2027, 3, 15, 9, 0, 0, 0, time.UTC)

// A closed breaker without a rate sends every delivery now, with no slot and no probe.
func TestAdmitWithoutBreakerOrRateSendsAll(t *testing.T) {
	a := Admit(Gate{Failures: 3, Threshold: 5}, []int64{1, 2, 3}, t0, time.Second)
	if len(a.Send) != 3 || len(a.Held) != 0 || len(a.Deferred) != 0 || a.NewProbe != 0 || a.Throttled {
		t.Fatalf("admission = %+v, want all three sent", a)
	}
	for _, s := range a.Send {
		if !s.NotBefore.IsZero() || s.Probe {
			t.Errorf("%+v: want no slot, no probe", s)
		}
	}
}

// Behind an open breaker one delivery probes and the others are held; with a valid probe elsewhere
// every delivery of the round is held; the probe waits for its ProbeAt.
func TestAdmitBehindAnOpenBreaker(t *testing.T) {
	open := Gate{Failures: 5, Threshold: 5}
	a := Admit(open, []int64{4, 5, 6}, t0, time.Second)
	if a.NewProbe != 4 || len(a.Send) != 1 || a.Send[0].ID != 4 || !a.Send[0].Probe || len(a.Held) != 2 {
		t.Errorf("no probe yet: %+v, want 4 probing (protecting the others), 5 and 6 held", a)
	}
	alone := Admit(open, []int64{4}, t0, time.Second)
	if len(alone.Send) != 1 || alone.Send[0].Probe {
		t.Errorf("a lone delivery with no backlog: %+v, want sent, not protected", alone)
	}
	if b := Admit(Gate{Failures: 5, Threshold: 5, Backlog: true}, []int64{4}, t0, time.Second); !b.Send[0].Probe {
		t.Errorf("a lone delivery before a held backlog: %+v, want protected", b)
	}
	elsewhere := Admit(Gate{Failures: 5, Threshold: 5, Probe: 9, ProbeValid: true}, []int64{4, 5}, t0, time.Second)
	if len(elsewhere.Send) != 0 || len(elsewhere.Held) != 2 || elsewhere.NewProbe != 0 {
		t.Errorf("a valid probe elsewhere: %+v, want both held, the probe unchanged", elsewhere)
	}
	own := Admit(Gate{Failures: 5, Threshold: 5, Probe: 5, ProbeValid: true}, []int64{4, 5}, t0, time.Second)
	if own.NewProbe != 5 || len(own.Send) != 1 || own.Send[0].ID != 5 || len(own.Held) != 1 || own.Held[0] != 4 {
		t.Errorf("the probe in the round: %+v, want 5 sent, 4 held", own)
	}
	later := Admit(Gate{Failures: 5, Threshold: 5, ProbeAt: t0.Add(time.Minute)}, []int64{4, 5}, t0, time.Second)
	if len(later.Send) != 0 || !later.Deferred[4].Equal(t0.Add(time.Minute)) || len(later.Held) != 1 {
		t.Errorf("a probe not due yet: %+v, want 4 deferred to its ProbeAt, 5 held", later)
	}
}

// Under a rate each delivery takes the next send slot from the later of now and the endpoint's next
// free one; a slot past the window defers the delivery to it, and the next free slot follows the
// ones taken.
func TestAdmitUnderARateTakesSendSlots(t *testing.T) {
	a := Admit(Gate{Rate: 2, NextSlot: t0.Add(200 * time.Millisecond)}, []int64{1, 2, 3, 4}, t0, time.Second)
	if len(a.Send) != 2 || !a.Send[0].NotBefore.Equal(t0.Add(200*time.Millisecond)) || !a.Send[1].NotBefore.Equal(t0.Add(700*time.Millisecond)) {
		t.Fatalf("sent %+v, want slots at +200ms and +700ms", a.Send)
	}
	if !a.Deferred[3].Equal(t0.Add(1200*time.Millisecond)) || !a.Deferred[4].Equal(t0.Add(1700*time.Millisecond)) {
		t.Errorf("deferred %v, want +1.2s and +1.7s", a.Deferred)
	}
	if !a.Throttled || !a.NextSlot.Equal(t0.Add(1200*time.Millisecond)) {
		t.Errorf("next slot %v (%v), want +1.2s", a.NextSlot, a.Throttled)
	}
	past := Admit(Gate{Rate: 10, NextSlot: t0.Add(-time.Hour)}, []int64{1}, t0, time.Second)
	if !past.Send[0].NotBefore.Equal(t0) || !past.NextSlot.Equal(t0.Add(100*time.Millisecond)) {
		t.Errorf("a next slot in the past: %+v, want now", past)
	}
}

// The k-th probe waits the schedule's k-th wait, its last past its end; a schedule of one attempt
// has no probe wait.
func TestProbeWaitFollowsTheSchedule(t *testing.T) {
	s := Schedule{Waits: []time.Duration{0, time.Second, time.Minute}}
	for k, want := range map[int]time.Duration{1: time.Second, 2: time.Minute, 7: time.Minute} {
		if w, ok := s.ProbeWait(k); !ok || w != want {
			t.Errorf("probe %d: %v %v, want %v", k, w, ok, want)
		}
	}
	if _, ok := (Schedule{Waits: []time.Duration{0}}).ProbeWait(1); ok {
		t.Error("a one-attempt schedule has a probe wait")
	}
}

// Retry-After is delay-seconds or an HTTP date, never negative, at most MaxRetryAfter.
func TestParseRetryAfter(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"":          0,
		" 7 ":       7 * time.Second,
		"0":         0,
		"-3":        0,
		"soon":      0,
		"999999999": MaxRetryAfter,
		t0.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second,
		t0.Add(-time.Hour).Format(http.TimeFormat):       0,
		t0.Add(48 * time.Hour).Format(http.TimeFormat):   MaxRetryAfter,
	} {
		if got := ParseRetryAfter(v, t0); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

// A round's attempts move the breaker: a streak that ended closes it; one that lasted DisableAfter
// disables the endpoint; below the threshold the streak is counted from its first failure.
func TestAfterRoundClosesDisablesOrCounts(t *testing.T) {
	s := Schedule{Waits: []time.Duration{0, time.Second, time.Minute}}
	fail := []RoundAttempt{{ID: 7, Failed: true, End: t0.Add(time.Second), Pending: true, Next: t0.Add(2 * time.Second)},
		{ID: 3, Failed: true, End: t0, Pending: true, Next: t0.Add(time.Second)}}
	if st := AfterRound(Breaker{}, fail, s); st.Do != CloseBreaker {
		t.Errorf("no streak: %+v, want closed", st)
	}
	if st := AfterRound(Breaker{Failures: 2}, []RoundAttempt{{ID: 1}}, s); st.Do != KeepBreaker {
		t.Errorf("no failure in the round: %+v, want kept", st)
	}
	if st := AfterRound(Breaker{Failures: 2, Threshold: 5}, fail, s); st.Do != CountStreak || !st.Since.Equal(t0) {
		t.Errorf("below the threshold: %+v, want counted since the first failure", st)
	}
	long := Breaker{Failures: 9, Threshold: 5, Since: t0.Add(-time.Hour), DisableAfter: time.Hour}
	if st := AfterRound(long, fail, s); st.Do != DisableEndpoint {
		t.Errorf("failing for an hour: %+v, want disabled", st)
	}
	long.Disabled = true
	if st := AfterRound(long, fail, s); st.Do != OpenBreaker {
		t.Errorf("disabled already: %+v, want the breaker", st)
	}
}

// At the threshold the first failure still pending becomes the probe, due after the schedule's wait
// for the next probe and never before its own due time; the others are held. A probe that failed
// again probes again, protected, after the receiver's Retry-After if that is later; a valid probe
// elsewhere stays; with no failure left pending, a held one is promoted.
func TestAfterRoundOpenBreakerKeepsOneProbe(t *testing.T) {
	s := Schedule{Waits: []time.Duration{0, time.Second, time.Minute}}
	fail := []RoundAttempt{{ID: 7, Failed: true, End: t0.Add(time.Second), Pending: true, Next: t0.Add(2 * time.Second)},
		{ID: 3, Failed: true, End: t0, Pending: true, Next: t0.Add(time.Hour)}}
	st := AfterRound(Breaker{Failures: 5, Threshold: 5}, fail, s)
	if st.Do != OpenBreaker || st.Probe != 3 || len(st.Hold) != 1 || st.Hold[0] != 7 || !st.At.Equal(t0.Add(time.Hour)) || st.Probes != 0 {
		t.Errorf("opened: %+v, want 3 probing at its own due time, 7 held", st)
	}
	again := []RoundAttempt{{ID: 3, Failed: true, End: t0, Pending: true, Protected: true, RetryAfter: t0.Add(10 * time.Minute)}}
	st = AfterRound(Breaker{Failures: 6, Threshold: 5, Since: t0, Probe: 3, ProbeValid: true, Probes: 1}, again, s)
	if st.Probe != 3 || !st.Protect || st.Probes != 2 || !st.At.Equal(t0.Add(10*time.Minute)) {
		t.Errorf("the probe failed again: %+v, want it again, protected, after its Retry-After", st)
	}
	st = AfterRound(Breaker{Failures: 6, Threshold: 5, Since: t0, Probe: 9, ProbeValid: true}, fail, s)
	if !st.KeepProbe || st.Probe != 0 || len(st.Hold) != 2 {
		t.Errorf("a valid probe elsewhere: %+v, want it kept and both held", st)
	}
	done := []RoundAttempt{{ID: 3, Failed: true, End: t0}}
	st = AfterRound(Breaker{Failures: 6, Threshold: 5, Since: t0, ProbeAt: t0.Add(time.Hour)}, done, s)
	if !st.Promote || !st.At.Equal(t0.Add(time.Hour)) {
		t.Errorf("nothing left pending: %+v, want a held one promoted, not before the probe's time", st)
	}
}
