package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/caldav/caldavsink"
	"bookingledger/adapters/httpapi/sample"
	"bookingledger/adapters/providers/calcom"
)

// permDelivery is one Cal.com delivery of a permutation run.
type permDelivery struct {
	name   string // create, reschedule, cancel
	event  string
	uid    string
	start  time.Time
	events int // events a first delivery appends
}

type permRun struct {
	thread   string // calcom-<uid of the first booking>
	host     string
	final    string // active or canceled
	finalAt  time.Time
	sequence []permDelivery
}

func permutations(n int) [][]int {
	if n == 1 {
		return [][]int{{0}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

// TestStepsUnderEveryArrivalOrder: for a Cal.com booking created, rescheduled and/or canceled, every
// arrival order with every subset of deliveries duplicated (right after the original or at the end),
// processed between arrivals: the final calendar objects depend only on the final state (one at the
// final slot for an active booking, none for a canceled one); no confirmation is sent after the
// cancel was recorded; a cancellation email goes out exactly when a confirmation did; never two
// emails of one kind for one state; a cancel that arrives first means no email at all. A rebuild of
// the calendar and of the process projection then sends nothing.
func TestStepsUnderEveryArrivalOrder(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	var writes atomic.Int32
	w := newStepsWorld(t, nil, func(r *http.Request) int {
		if r.Method == http.MethodPut || r.Method == http.MethodDelete {
			writes.Add(1)
		}
		return 0
	})
	env := w.env()
	srv := startServe(t, env)

	base := time.Date(2031, 5, 5, 9, 0, 0, 0, time.UTC)
	sets := []struct {
		names []string
		final string
	}{
		{[]string{"create", "reschedule"}, "active"},
		{[]string{"create", "reschedule", "cancel-new"}, "canceled"},
		{[]string{"create", "cancel"}, "canceled"},
	}
	var runs []*permRun
	for _, set := range sets {
		for _, perm := range permutations(len(set.names)) {
			for mask := 0; mask < 1<<len(set.names); mask++ {
				i := len(runs)
				uid := fmt.Sprintf("perm%d", i)
				s1 := base.Add(time.Duration(i) * time.Hour)
				s2 := s1.Add(24 * time.Hour)
				r := &permRun{thread: "calcom-" + uid, host: fmt.Sprintf("perm-host-%d", i), final: set.final, finalAt: s2}
				byName := map[string]permDelivery{
					"create":     {name: "create", event: calcom.TriggerBookingCreated, uid: uid, start: s1, events: 1},
					"reschedule": {name: "reschedule", event: calcom.TriggerBookingRescheduled, uid: uid, start: s2, events: 2},
					"cancel-new": {name: "cancel", event: calcom.TriggerBookingCancelled, uid: sample.CalcomRescheduledUID(uid), start: s2, events: 1},
					"cancel":     {name: "cancel", event: calcom.TriggerBookingCancelled, uid: uid, start: s1, events: 1},
				}
				var tail []permDelivery
				for _, k := range perm {
					d := byName[set.names[k]]
					r.sequence = append(r.sequence, d)
					if mask&(1<<k) != 0 {
						dup := d
						dup.events = 0
						if (i+k)%2 == 0 {
							r.sequence = append(r.sequence, dup)
						} else {
							tail = append(tail, dup)
						}
					}
				}
				r.sequence = append(r.sequence, tail...)
				runs = append(runs, r)
			}
		}
	}

	pool := w.db(t)
	expected := 0
	quiet := func(what string) {
		waitFor(t, 120*time.Second, what, func() (bool, string) {
			var cal, proc, open int
			err := pool.QueryRow(context.Background(), `SELECT
coalesce((SELECT events_applied FROM projection_checkpoints WHERE name = 'calendar'), 0),
coalesce((SELECT events_applied FROM projection_checkpoints WHERE name = 'process'), 0),
(SELECT count(*) FROM process_steps WHERE state IN ('pending', 'requested'))`).Scan(&cal, &proc, &open)
			if err != nil {
				return false, err.Error()
			}
			return cal == expected && proc == expected && open == 0, fmt.Sprintf("calendar %d, process %d of %d events; %d steps open", cal, proc, expected, open)
		})
	}
	// round[msgIndex] is the round during which each message arrived; cancelRound per run.
	var arrivedIn []int
	cancelRound := map[string]int{} // thread → round of the cancel's first arrival
	canceled := map[string]string{} // thread → the booking the cancel is for
	createRound := map[string]int{} // thread → round of the first create or reschedule
	maxLen := 0
	for _, r := range runs {
		maxLen = max(maxLen, len(r.sequence))
	}
	for round := 0; round < maxLen; round++ {
		var wg sync.WaitGroup
		for _, r := range runs {
			if round >= len(r.sequence) {
				continue
			}
			d := r.sequence[round]
			expected += d.events
			if d.name == "cancel" {
				if _, ok := cancelRound[r.thread]; !ok {
					cancelRound[r.thread], canceled[r.thread] = round, "calcom-"+d.uid
				}
			} else {
				created := "calcom-" + d.uid
				if d.name == "reschedule" {
					created = "calcom-" + sample.CalcomRescheduledUID(d.uid)
				}
				if _, ok := createRound[created]; !ok {
					createRound[created] = round
				}
			}
			wg.Go(func() {
				del, err := sample.Build("calcom", d.event, demoCalcomSecret, sample.Params{Booking: d.uid, Host: r.host, Start: d.start}, time.Now())
				if err != nil {
					t.Errorf("build: %v", err)
					return
				}
				req, _ := http.NewRequest(http.MethodPost, srv.Base+"/webhooks/calcom", bytes.NewReader(del.Body))
				req.Header = del.Header.Clone()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Errorf("post: %v", err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("%s %s: %d", d.event, d.uid, resp.StatusCode)
				}
			})
		}
		wg.Wait()
		quiet(fmt.Sprintf("round %d processed", round))
		for len(arrivedIn) < len(w.smtp.Messages()) {
			arrivedIn = append(arrivedIn, round)
		}
	}

	// Map messages to threads and kinds through their Message-ID (the step key).
	threadOf := map[string]string{}
	kindOf := map[string]string{}
	bookingOf := map[string]string{}
	rows, err := pool.Query(context.Background(), `SELECT key::text, thread, kind, booking FROM process_steps`)
	require.NoError(t, err)
	for rows.Next() {
		var key, thread, kind, b string
		require.NoError(t, rows.Scan(&key, &thread, &kind, &b))
		threadOf[key+"@bookingledger"], kindOf[key+"@bookingledger"], bookingOf[key+"@bookingledger"] = thread, kind, b
	}
	rows.Close()
	type sent struct {
		kind, booking string
		round         int
	}
	mails := map[string][]sent{}
	seenIDs := map[string]bool{}
	for i, m := range w.smtp.Messages() {
		id := strings.Trim(m.MessageID, "<>")
		require.False(t, seenIDs[id], "Message-ID %s sent twice", id)
		seenIDs[id] = true
		require.Contains(t, threadOf, id, "every message answers a step")
		mails[threadOf[id]] = append(mails[threadOf[id]], sent{kindOf[id], bookingOf[id], arrivedIn[i]})
	}
	for _, o := range w.dav.Store.Objects() {
		require.Contains(t, threadOf, o.UID+"@bookingledger", "every calendar object answers a step: %s", o)
	}

	for _, r := range runs {
		names := make([]string, len(r.sequence))
		for i, d := range r.sequence {
			names[i] = d.name
			if d.events == 0 {
				names[i] += "(dup)"
			}
		}
		what := r.thread + " " + strings.Join(names, ",")
		count := map[string]int{}
		for _, m := range mails[r.thread] {
			count[m.kind]++
			if m.kind == "invitee_email.confirmation" || m.kind == "invitee_email.rescheduled" {
				if cr, ok := cancelRound[r.thread]; ok && m.booking == canceled[r.thread] {
					assert.Less(t, m.round, cr, "%s: %s of %s sent after its cancel was recorded", what, m.kind, m.booking)
				}
			}
		}
		for k, n := range count {
			assert.LessOrEqual(t, n, 1, "%s: two emails of kind %s", what, k)
		}
		var mine []caldavsink.Object
		for _, o := range w.dav.Store.Objects() {
			if threadOf[o.UID+"@bookingledger"] == r.thread {
				mine = append(mine, o)
			}
		}
		switch r.final {
		case "active":
			require.Len(t, mine, 1, what)
			assert.True(t, mine[0].Start.Equal(r.finalAt), "%s: object at %s, want %s", what, mine[0].Start, r.finalAt)
			confirmed := assert.Equal(t, 1, count["invitee_email.confirmation"], what)
			if notCanceled := assert.Zero(t, count["invitee_email.cancellation"], what); !confirmed || !notCanceled {
				logSteps(t, pool, r.thread)
			}
		case "canceled":
			assert.Empty(t, mine, "%s: a canceled booking leaves no calendar object", what)
			if !assert.Equal(t, count["invitee_email.confirmation"] > 0, count["invitee_email.cancellation"] == 1,
				"%s: a cancellation exactly when a confirmation went out (%v)", what, count) {
				logSteps(t, pool, r.thread)
			}
			if c := canceled[r.thread]; c == r.thread && cancelRound[r.thread] < createRound[c] {
				assert.Empty(t, mails[r.thread], "%s: the cancel arrived before the create: no email at all", what)
			}
		}
	}

	// A rebuild of the calendar and of the process projection sends nothing new.
	msgsBefore, writesBefore := len(w.smtp.Messages()), writes.Load()
	objsBefore := w.dav.Store.Objects()
	var stepsBefore int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM process_steps`).Scan(&stepsBefore))
	srv.Stop(t)
	for _, name := range []string{"calendar", "process"} {
		out, errOut, code := cli(t, env, "rebuild", name, "--quiet")
		require.Equal(t, 0, code, "rebuild %s: %s%s", name, out, errOut)
	}
	startServe(t, env)
	quiet("after the rebuilds")
	time.Sleep(time.Second)
	assert.Equal(t, msgsBefore, len(w.smtp.Messages()), "no email after the rebuild")
	assert.Equal(t, writesBefore, writes.Load(), "no calendar write after the rebuild")
	assert.Equal(t, objsBefore, w.dav.Store.Objects())
	var stepsAfter int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM process_steps`).Scan(&stepsAfter))
	assert.Equal(t, stepsBefore, stepsAfter, "re-planning found every key")
	t.Logf("%d runs, %d emails, %d calendar writes", len(runs), msgsBefore, writesBefore)
}

// TestCalendarUpdateWaitsForItsCreate: a Cal.com booking rescheduled while its calendar create is
// in flight (the CalDAV server holds the PUT). The update waits for the create, then moves the
// object: one object, at the new slot. An update run before its create is done would find no object
// and be skipped, and the object would stay at the old slot.
func TestCalendarUpdateWaitsForItsCreate(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	release := make(chan struct{})
	var released sync.Once
	var held atomic.Int32
	w := newStepsWorld(t, nil, func(r *http.Request) int {
		if r.Method == http.MethodPut && held.Add(1) == 1 {
			<-release
		}
		return 0
	})
	t.Cleanup(func() { released.Do(func() { close(release) }) }) // registered after the sink's Close: runs first
	w.vars[envStepsCallTimeout] = "30s"
	srv := startServe(t, w.env())
	post := func(event string, start time.Time) {
		t.Helper()
		del, err := sample.Build("calcom", event, demoCalcomSecret, sample.Params{Booking: "wait1", Host: "wait-host", Start: start}, time.Now())
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, srv.Base+"/webhooks/calcom", bytes.NewReader(del.Body))
		require.NoError(t, err)
		req.Header = del.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, event)
	}
	states := func() string { return strings.Join(w.stepStates(t, "calcom-wait1"), " ") }
	s1 := time.Date(2031, 6, 2, 9, 0, 0, 0, time.UTC)
	s2 := s1.Add(24 * time.Hour)
	post(calcom.TriggerBookingCreated, s1)
	waitFor(t, 30*time.Second, "the create's PUT held", func() (bool, string) { return held.Load() == 1, states() })
	post(calcom.TriggerBookingRescheduled, s2)
	waitFor(t, 30*time.Second, "the update planned", func() (bool, string) { return strings.Contains(states(), "host_calendar.update="), states() })
	require.Contains(t, states(), "host_calendar.create=requested")
	time.Sleep(1500 * time.Millisecond) // a worker takes the update's job meanwhile
	require.Contains(t, states(), "host_calendar.update=pending", "the update ran before its create was done")
	released.Do(func() { close(release) })
	waitFor(t, 60*time.Second, "the calendar steps done", func() (bool, string) {
		return strings.Contains(states(), "host_calendar.create=done") && strings.Contains(states(), "host_calendar.update=done"), states()
	})
	objs := w.dav.Store.Objects()
	require.Len(t, objs, 1)
	assert.True(t, objs[0].Start.Equal(s2), "the object is at %s, want the new slot %s", objs[0].Start, s2)
}

// logSteps logs the steps of a thread with their states and errors: what a failed assertion on its
// emails needs to tell a planning mistake from a step that ended without sending.
func logSteps(t *testing.T, pool *pgxpool.Pool, thread string) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT kind, booking, state, attempts, last_error, note
FROM process_steps WHERE thread = $1 ORDER BY id`, thread)
	if err != nil {
		t.Logf("steps of %s: %v", thread, err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var kind, booking, state, lastErr, note string
		var attempts int
		if err := rows.Scan(&kind, &booking, &state, &attempts, &lastErr, &note); err != nil {
			t.Logf("steps of %s: %v", thread, err)
			return
		}
		t.Logf("step of %s: %s %s %s attempts=%d error=%q note=%q", thread, kind, booking, state, attempts, lastErr, note)
	}
}
