package relay

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// A receiver's answer decides the attempt's outcome: 2xx succeeded, 410 gone, anything else failed,
// with the Retry-After of a 429 or 503 only.
func TestAnsweredClassifiesTheReceiversAnswer(t *testing.T) {
	for _, c := range []struct {
		status     int
		retryAfter string
		outcome    string
		err        string
		wait       time.Duration
	}{
		{200, "", OutcomeSucceeded, "", 0},
		{204, "60", OutcomeSucceeded, "", 0},
		{410, "", OutcomeGone, "410 Gone: endpoint disabled", 0},
		{500, "60", OutcomeFailed, "HTTP 500", 0},
		{429, "60", OutcomeFailed, "HTTP 429", time.Minute},
		{503, "7", OutcomeFailed, "HTTP 503", 7 * time.Second},
		{302, "", OutcomeFailed, "HTTP 302", 0},
	} {
		a := Attempt{At: t0}.Answered(c.status, "body", c.retryAfter)
		if a.Outcome != c.outcome || a.Err != c.err || a.RetryAfter != c.wait || a.Status != c.status || a.Response != "body" {
			t.Errorf("%d %q: %+v, want %s %q %v", c.status, c.retryAfter, a, c.outcome, c.err, c.wait)
		}
	}
}

// An attempt's outcome decides the delivery's state; a failure waits the schedule's next wait, or a
// longer Retry-After, and is dead past the schedule's end; a probe's failure waits its own attempt's
// wait again.
func TestNextFollowsTheSchedule(t *testing.T) {
	s := Schedule{Waits: []time.Duration{0, time.Second, time.Minute}}
	failed := Attempt{At: t0, Outcome: OutcomeFailed}
	for _, c := range []struct {
		a          Attempt
		run        int
		probe      bool
		state      string
		wait       time.Duration
		wantNextAt bool
	}{
		{Attempt{At: t0}, 0, false, StatePending, 0, false},
		{Attempt{At: t0, Outcome: OutcomeSucceeded}, 0, false, StateSucceeded, 0, false},
		{Attempt{At: t0, Outcome: OutcomeGone}, 0, false, StatePaused, 0, false},
		{failed, 0, false, StatePending, time.Second, true},
		{failed, 1, false, StatePending, time.Minute, true},
		{failed, 2, false, StateDead, 0, false},
		{Attempt{At: t0, Outcome: OutcomeFailed, RetryAfter: time.Hour}, 0, false, StatePending, time.Hour, true},
		{failed, 2, true, StatePending, time.Minute, true},
		{failed, 9, true, StatePending, time.Minute, true},
	} {
		state, wait, next := s.Next(c.a, c.run, c.probe)
		if state != c.state || wait != c.wait || (c.wantNextAt && !next.Equal(t0.Add(c.wait))) || (!c.wantNextAt && !next.IsZero()) {
			t.Errorf("%+v run %d probe %v: %s %v %v, want %s %v", c.a, c.run, c.probe, state, wait, next, c.state, c.wait)
		}
	}
}

// NewSchedule defaults the waits and the jitter, bounds the jitter to [0, 1] and refuses a negative
// wait.
func TestNewScheduleDefaultsAndBounds(t *testing.T) {
	s, err := NewSchedule(nil, 0)
	if err != nil || !reflect.DeepEqual(s.Waits, DefaultSchedule) || s.Jitter != DefaultJitter {
		t.Fatalf("NewSchedule(nil, 0) = %+v, %v", s, err)
	}
	if s, _ := NewSchedule([]time.Duration{0}, -1); s.Jitter != 0 {
		t.Errorf("negative jitter: %v, want 0", s.Jitter)
	}
	if s, _ := NewSchedule([]time.Duration{0}, 5); s.Jitter != 1 {
		t.Errorf("jitter 5: %v, want 1", s.Jitter)
	}
	if _, err := NewSchedule([]time.Duration{0, -time.Second}, 0); err == nil {
		t.Error("a negative wait is accepted")
	}
}

// The streaks count a round's kept attempts by endpoint, each endpoint's in the order they ended; a
// success right after a counted success of its endpoint counts for nothing.
func TestStreakOrderByEndpointThenEnd(t *testing.T) {
	at := func(s int, outcome string) Attempt {
		return Attempt{At: t0.Add(time.Duration(s) * time.Second), Outcome: outcome}
	}
	round := []StreakAttempt{
		{Endpoint: 2, Attempt: at(1, OutcomeFailed), Kept: true},    // 0
		{Endpoint: 1, Attempt: at(3, OutcomeSucceeded), Kept: true}, // 1
		{Endpoint: 1, Attempt: at(2, OutcomeSucceeded), Kept: true}, // 2
		{Endpoint: 1, Attempt: at(1, OutcomeFailed), Kept: false},   // 3: removed meanwhile
		{Endpoint: 2, Attempt: at(2, OutcomeSucceeded), Kept: true}, // 4
		{Endpoint: 2, Attempt: at(0, OutcomeSucceeded), Kept: true}, // 5
	}
	order, count := StreakOrder(round)
	if want := []int{2, 1, 5, 0, 4}; !reflect.DeepEqual(order, want) {
		t.Fatalf("order = %v, want %v", order, want)
	}
	if want := []bool{true, false, true, true, true}; !reflect.DeepEqual(count, want) {
		t.Errorf("count = %v, want %v", count, want)
	}
}

// ByEndpoint keeps each endpoint's items in their order, the endpoints in the order they first appear.
func TestByEndpointGroupsInFirstSeenOrder(t *testing.T) {
	type d struct{ ep, id int64 }
	got := ByEndpoint([]d{{3, 1}, {1, 2}, {3, 3}, {2, 4}, {1, 5}}, func(x d) int64 { return x.ep })
	want := [][]d{{{3, 1}, {3, 3}}, {{1, 2}, {1, 5}}, {{2, 4}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ByEndpoint = %v, want %v", got, want)
	}
}

// A job's course: inline retries come back due, in id order; deferred ones and those a round moved
// go to jobs of their own; held, removed and paused ones need none; a stop hands the inline retries
// off.
func TestCourseOfAJob(t *testing.T) {
	c := NewCourse()
	if !c.Empty() || !c.First().IsZero() {
		t.Fatal("a new course is empty")
	}
	c.Retry(3, t0.Add(2*time.Second), true)
	c.Retry(1, t0.Add(time.Second), true)
	c.Retry(2, t0.Add(time.Hour), false)
	if !c.First().Equal(t0.Add(time.Second)) {
		t.Errorf("First = %v", c.First())
	}
	if due := c.Due(t0.Add(2 * time.Second)); !reflect.DeepEqual(due, []int64{1, 3}) || len(c.Inline) != 0 {
		t.Errorf("Due = %v, inline left %v", due, c.Inline)
	}
	c.Admitted(map[int64]time.Time{4: t0.Add(time.Minute)}, map[int64]bool{2: true})
	if want := map[int64]time.Time{4: t0.Add(time.Minute)}; !reflect.DeepEqual(c.Later, want) {
		t.Errorf("Later = %v, want %v", c.Later, want)
	}
	c.Retry(5, t0.Add(time.Second), true)
	c.Moved(map[int64]time.Time{4: {}, 5: t0.Add(3 * time.Second), 6: t0.Add(time.Hour)}, t0,
		func(wait time.Duration) bool { return wait < time.Minute })
	if c.Inline[5] != t0.Add(3*time.Second) || c.Later[6] != t0.Add(time.Hour) || len(c.Later) != 1 || len(c.Inline) != 1 {
		t.Errorf("after Moved: inline %v, later %v", c.Inline, c.Later)
	}
	c.Stop()
	if len(c.Later) != 2 || c.Later[5] != t0.Add(3*time.Second) {
		t.Errorf("after Stop: later %v", c.Later)
	}
	c.Drop(5)
	if _, ok := c.Later[5]; ok {
		t.Error("a dropped delivery keeps its job")
	}
}

// A replay query needs an endpoint, a window and a valid rate; it selects dead deliveries, and
// succeeded ones unless OnlyFailed; only a window replay backfills; its window is the deliveries'
// microseconds; its rate is its own, else the relay's, of which a throttled endpoint gives a share.
func TestReplayQuery(t *testing.T) {
	q := ReplayQuery{EndpointID: 1, From: t0, To: t0.Add(time.Hour), Types: []string{"booking.*"}}
	if err := q.Check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []ReplayQuery{{From: t0, To: t0.Add(time.Hour)}, {EndpointID: 1, From: t0, To: t0},
		{EndpointID: 1, From: t0, To: t0.Add(time.Hour), Rate: -1}} {
		if err := bad.Check(); !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrInvalidRate) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if err := CheckRate(MaxReplayRate * 2); !errors.Is(err, ErrInvalidRate) {
		t.Errorf("CheckRate above the bound: %v", err)
	}
	if !reflect.DeepEqual(q.States(), []string{StateSucceeded, StateDead}) || !q.Backfills() {
		t.Errorf("window replay: %v %v", q.States(), q.Backfills())
	}
	failed := q
	failed.OnlyFailed = true
	if !reflect.DeepEqual(failed.States(), []string{StateDead}) || failed.Backfills() {
		t.Errorf("failures replay: %v %v", failed.States(), failed.Backfills())
	}
	if !q.Covers(t0.Add(-time.Nanosecond+time.Microsecond), "booking.created") || q.Covers(t0.Add(-time.Nanosecond), "booking.created") ||
		q.Covers(t0.Add(time.Hour), "booking.created") || q.Covers(t0, "payment.paid") {
		t.Error("Covers: wrong window or types")
	}
	if q.RateOf(0, 250) != 250 || q.RateOf(100, 250) != 50 || q.RateOf(1000, 250) != 250 {
		t.Error("RateOf without a rate of its own")
	}
	q.Rate = 7
	if q.RateOf(100, 250) != 7 {
		t.Error("RateOf with a rate of its own")
	}
}

// The pacer makes the k-th delivery's job due k/rate after the start.
func TestPacerSpacesJobsAtTheRate(t *testing.T) {
	p := Pacer{Start: t0, Rate: 10}
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{32, 0}, {32, 3200 * time.Millisecond}, {1, 6400 * time.Millisecond}, {5, 6500 * time.Millisecond}} {
		if at := p.Take(c.n); !at.Equal(t0.Add(c.want)) {
			t.Errorf("Take(%d) = %v, want start + %v", c.n, at.Sub(t0), c.want)
		}
	}
}
