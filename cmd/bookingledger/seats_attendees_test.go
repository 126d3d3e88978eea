package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-ical"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/caldav/caldavsink"
	"bookingledger/adapters/providers/calcom"
	"bookingledger/projections/steps"
)

// seatDelivery is one Cal.com seat delivery of an attendee run.
type seatDelivery struct {
	name      string // what it is, for messages
	trigger   string
	seat      string // the seat reference
	offset    time.Duration
	attendees []string
}

// objectAttendees returns the mailto values and names of an object's ATTENDEE lines, sorted.
func objectAttendees(t *testing.T, o caldavsink.Object) []string {
	t.Helper()
	cal, err := ical.NewDecoder(bytes.NewReader(o.Data)).Decode()
	require.NoError(t, err)
	var out []string
	for _, e := range cal.Events() {
		for _, p := range e.Props.Values(ical.PropAttendee) {
			require.Equal(t, "CLIENT", p.Params.Get("SCHEDULE-AGENT"), "no server schedules")
			out = append(out, p.Params.Get(ical.ParamCommonName)+" "+strings.TrimPrefix(p.Value, "mailto:"))
		}
	}
	slices.Sort(out)
	return out
}

// TestSeatedEventListsItsCurrentAttendeesUnderEveryArrivalOrder (issue #35): three attendees take
// seats of a booking, one leaves, and the freed seat is taken again; under every arrival order of the
// five deliveries, with one of them redelivered (right after itself or at the end), processed between
// arrivals, the host's CalDAV object ends listing exactly the attendees the calendar holds, and each
// attendee state was written once: no two effected calendar steps in a row wrote the same state, the
// last wrote the current one, and every PUT was a step's. Every order plans the leaver's own
// cancellation, once, and no other seat's (a cancel that arrived before its seat's create is planned
// with the create). A rebuild of the calendar and of the process projection then plans, changes and
// sends nothing: every step, emails included, is as incremental planning left it. Erasing a booking
// rewrites its object without its attendees. It waits on the events the receipts recorded, so it runs
// on either event store.
func TestSeatedEventListsItsCurrentAttendeesUnderEveryArrivalOrder(t *testing.T) {
	t.Parallel() // it has its own database, ports, CalDAV sink and serve
	var mu sync.Mutex
	puts := map[string]int{} // object path → PUTs
	w := newStepsWorld(t, nil, func(r *http.Request) int {
		if r.Method == http.MethodPut {
			mu.Lock()
			puts[r.URL.Path]++
			mu.Unlock()
		}
		return 0
	})
	env := w.env()
	srv := startServe(t, env)
	create, cancel := calcom.TriggerBookingCreated, calcom.TriggerBookingCancelled
	base := time.Date(2032, 2, 2, 8, 0, 0, 0, time.UTC)

	type run struct {
		uid      string
		start    time.Time
		sequence []seatDelivery
	}
	var runs []run
	for i, perm := range permutations(5) {
		uid := fmt.Sprintf("att%d", i)
		all := []seatDelivery{
			{"ada takes a seat", create, uid + "-a", 0, []string{"ada"}},
			{"bob takes a seat", create, uid + "-b", time.Second, []string{"ada", "bob"}},
			{"cy takes a seat", create, uid + "-c", 2 * time.Second, []string{"ada", "bob", "cy"}},
			{"cy leaves", cancel, uid + "-c", time.Hour, []string{"cy"}},
			{"dee takes the freed seat", create, uid + "-d", 2 * time.Hour, []string{"ada", "bob", "dee"}},
		}
		r := run{uid: uid, start: base.Add(time.Duration(i) * time.Hour)}
		for _, k := range perm {
			r.sequence = append(r.sequence, all[k])
		}
		dup := all[perm[i%5]]
		dup.name += " (again)"
		if i%2 == 0 {
			at := slices.Index(perm, perm[i%5]) + 1
			r.sequence = slices.Insert(r.sequence, at, dup)
		} else {
			r.sequence = append(r.sequence, dup)
		}
		runs = append(runs, r)
	}

	pool := w.db(t)
	ctx := context.Background()
	quiet := func(what string) {
		t.Helper()
		waitFor(t, 180*time.Second, what, func() (bool, string) {
			var events, cal, proc, open int
			// The events stored, counted from the receipts that recorded them (the events table is
			// PostgreSQL's; with EventStoreDB the log is elsewhere).
			err := pool.QueryRow(ctx, `SELECT (SELECT count(DISTINCT e) FROM receipts CROSS JOIN LATERAL unnest(event_ids) e WHERE outcome = 'accepted'),
coalesce((SELECT events_applied FROM projection_checkpoints WHERE name = 'calendar'), 0),
coalesce((SELECT events_applied FROM projection_checkpoints WHERE name = 'process'), 0),
(SELECT count(*) FROM process_steps WHERE state IN ('pending', 'requested'))`).Scan(&events, &cal, &proc, &open)
			if err != nil {
				return false, err.Error()
			}
			return cal == events && proc == events && open == 0, fmt.Sprintf("calendar %d, process %d of %d events; %d steps open", cal, proc, events, open)
		})
	}
	// Each round posts one delivery of every run, the runs' at once (they are bookings of their own,
	// an hour apart), then waits until everything is processed: each run's deliveries arrive in its
	// order, processed between arrivals.
	for round := range 6 {
		var wg sync.WaitGroup
		errs := make([]error, len(runs))
		next := make(chan int)
		for range 8 {
			wg.Go(func() {
				for i := range next {
					r := runs[i]
					d := r.sequence[round]
					errs[i] = postSeatErr(srv.Base, d.trigger, r.uid, r.start, d.offset, d.seat, d.attendees...)
				}
			})
		}
		for i := range runs {
			next <- i
		}
		close(next)
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "round %d, run %s: %s", round, runs[i].uid, runs[i].sequence[round].name)
		}
		quiet(fmt.Sprintf("round %d processed", round))
	}

	// objectOf returns the thread's objects: those whose UID is the key of one of its steps (one
	// query for all the sink's objects).
	objectOf := func(thread string) []caldavsink.Object {
		objs := w.dav.Store.Objects()
		uids := make([]string, len(objs))
		for i, o := range objs {
			uids[i] = o.UID
		}
		rows, err := pool.Query(ctx, `SELECT key::text FROM process_steps WHERE thread = $1 AND key::text = ANY($2)`, thread, uids)
		require.NoError(t, err)
		mine, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		var out []caldavsink.Object
		for _, o := range objs {
			if slices.Contains(mine, o.UID) {
				out = append(out, o)
			}
		}
		return out
	}
	// want is the "Name address" of each seat the calendar holds now, from the seats' contacts.
	want := func(booking string) (string, []string) {
		var status string
		var seats []string
		require.NoError(t, pool.QueryRow(ctx, `SELECT status, seats FROM calendar_bookings WHERE booking = $1`, booking).Scan(&status, &seats))
		var out []string
		for _, s := range seats {
			var name, email string
			require.NoError(t, pool.QueryRow(ctx, `SELECT name, email FROM seat_contacts WHERE booking = $1 AND seat = $2`, booking, s).Scan(&name, &email))
			out = append(out, name+" "+email)
		}
		slices.Sort(out)
		return status, out
	}
	written := func(thread string) []string {
		rows, err := pool.Query(ctx, `SELECT attendees FROM process_steps WHERE thread = $1 AND kind LIKE 'host_calendar.%' AND state = 'done' ORDER BY id`, thread)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	checked := 0
	for _, r := range runs {
		thread := "calcom-" + r.uid
		var names []string
		for _, d := range r.sequence {
			names = append(names, d.name)
		}
		what := thread + ": " + strings.Join(names, ", ")
		status, attendees := want(thread)
		objs := objectOf(thread)
		closed := slices.Contains(w.stepStates(t, thread), "host_calendar.delete=done")
		if status != "active" || closed {
			// Canceled, or canceled on the way (an order in which the only seat left first): the thread
			// is finished, as for any booking (docs/process-steps.md).
			assert.Empty(t, objs, "%s: %s: no object", what, status)
			continue
		}
		checked++
		require.Len(t, objs, 1, "%s: steps %v, objects %d", what, w.stepStates(t, thread), len(w.dav.Store.Objects()))
		assert.Equal(t, attendees, objectAttendees(t, objs[0]), "%s: the object lists exactly the current attendees", what)
		states := written(thread)
		require.NotEmpty(t, states, what)
		for i := 1; i < len(states); i++ {
			assert.NotEqual(t, states[i-1], states[i], "%s: one write per attendee state (%v)", what, states)
		}
		var seats []string
		require.NoError(t, pool.QueryRow(ctx, `SELECT seats FROM calendar_bookings WHERE booking = $1`, thread).Scan(&seats))
		assert.Equal(t, steps.AttendeeDigest(seats), states[len(states)-1], "%s: the last write is the current state", what)
		// Every PUT is a calendar step's attempt (a retry after a lost answer can PUT again; it
		// writes the same state, under If-Match).
		var attempts int
		require.NoError(t, pool.QueryRow(ctx, `SELECT coalesce(sum(attempts), 0) FROM process_steps WHERE thread = $1 AND kind LIKE 'host_calendar.%'`,
			thread).Scan(&attempts))
		mu.Lock()
		assert.GreaterOrEqual(t, puts[objs[0].Path], len(states), what)
		assert.LessOrEqual(t, puts[objs[0].Path], attempts, "%s: every PUT is a step's", what)
		mu.Unlock()
	}

	assert.Greater(t, checked, len(runs)/2, "most orders end with an object")
	t.Logf("%d runs, %d with an object, %d objects", len(runs), checked, len(w.dav.Store.Objects()))

	// Every order plans cy's own cancellation, once (sent, or skipped when cy is the contact of a
	// booking that ended with them: its own cancellation tells them), and no other seat's.
	for _, r := range runs {
		rows, err := pool.Query(ctx, `SELECT seat || ' ' || key::text FROM process_steps WHERE booking = $1 AND kind = $2 AND state IN ('done', 'skipped')`,
			"calcom-"+r.uid, string(steps.EmailSeatCancellation))
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		leaver := r.uid + "-c"
		assert.Equal(t, []string{leaver + " " + steps.SeatStepKey("calcom-"+r.uid, leaver).String()}, got, "%s: cy's cancellation, once", r.uid)
	}

	// A rebuild of the calendar and of the process projection plans, skips and revives nothing, and
	// writes nothing on the host calendars nor sends any email: every step, emails included, is as
	// incremental planning left it.
	allSteps := func() []string {
		rows, err := pool.Query(ctx, `SELECT concat_ws(' ', thread, kind, seat, key::text, state) FROM process_steps ORDER BY key`)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	stepsBefore := allSteps()
	objsBefore := w.dav.Store.Objects()
	mailsBefore := len(w.smtp.Messages())
	srv.Stop(t)
	for _, name := range []string{"calendar", "process"} {
		out, errOut, code := cli(t, env, "rebuild", name, "--quiet")
		require.Equal(t, 0, code, "rebuild %s: %s%s", name, out, errOut)
	}
	srv = startServe(t, env)
	quiet("after the rebuilds")
	time.Sleep(time.Second)
	assert.Equal(t, stepsBefore, allSteps(), "re-planning found every step's key, and left every step as it was")
	assert.Equal(t, objsBefore, w.dav.Store.Objects(), "no calendar write after the rebuilds")
	assert.Len(t, w.smtp.Messages(), mailsBefore, "no email after the rebuilds")

	// Erasing one booking rewrites its object without its attendees; the others stay as they are.
	var erased string
	for _, r := range runs {
		if objs := objectOf("calcom-" + r.uid); len(objs) == 1 && len(objectAttendees(t, objs[0])) > 0 {
			erased = "calcom-" + r.uid
			break
		}
	}
	require.NotEmpty(t, erased)
	other := objectOf("calcom-" + runs[len(runs)-1].uid)
	out, errOut, code := cli(t, env, "erase", "--booking", erased, "--by", "test")
	require.Equal(t, 0, code, "erase: %s%s", out, errOut)
	waitFor(t, 60*time.Second, "the erased booking's object rewritten", func() (bool, string) {
		objs := objectOf(erased)
		if len(objs) != 1 {
			return false, fmt.Sprintf("%d objects", len(objs))
		}
		got := objectAttendees(t, objs[0])
		return len(got) == 0, strings.Join(got, "; ")
	})
	data := string(objectOf(erased)[0].Data)
	for _, who := range []string{"ada", "Ada", "bob", "Bob", "dee", "Dee", "cy@"} {
		assert.NotContains(t, data, who, "the erased attendees are gone from the host's object")
	}
	// The sink stores the PUT before the worker records its answer: wait for the step to finish.
	var last string
	waitFor(t, 60*time.Second, "the erasure's update finished", func() (bool, string) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT kind || '=' || state FROM process_steps WHERE thread = $1 AND kind LIKE 'host_calendar.%'
ORDER BY id DESC LIMIT 1`, erased).Scan(&last))
		return !strings.HasSuffix(last, "=pending") && !strings.HasSuffix(last, "=requested"), last
	})
	assert.Equal(t, "host_calendar.update=done", last, "the erasure's update rewrote it")
	assert.Equal(t, other, objectOf("calcom-"+runs[len(runs)-1].uid), "another booking's object is untouched")
}

// waitStepsBesideAttendeeUpdates is waitSteps for a seated booking's thread, leaving out its
// host_calendar.update steps — how many its seat changes plan depends on when its create ran
// (TestSeatedEventListsItsCurrentAttendeesUnderEveryArrivalOrder counts them) — each of which must
// have finished done or skipped.
func (w *stepsWorld) waitStepsBesideAttendeeUpdates(t *testing.T, thread string, want ...string) {
	t.Helper()
	waitFor(t, 60*time.Second, "steps of "+thread, func() (bool, string) {
		var got []string
		for _, s := range w.stepStates(t, thread) {
			switch s {
			case "host_calendar.update=done", "host_calendar.update=skipped":
			default:
				got = append(got, s)
			}
		}
		return strings.Join(got, " ") == strings.Join(want, " "), strings.Join(w.stepStates(t, thread), " ")
	})
}
