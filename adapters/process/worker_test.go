package process_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/caldav"
	"bookingledger/adapters/caldav/caldavsink"
	"bookingledger/adapters/email"
	"bookingledger/adapters/email/smtpsink"
	"bookingledger/adapters/jobs"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/adapters/process"
)

// workerWorld is a migrated database, a CalDAV server that counts the requests it gets, and one step
// worker acting on it, called directly with a job (no River client): the claim's rules, one at a time.
type workerWorld struct {
	pool     *pgxpool.Pool
	sink     *caldavsink.Server
	requests atomic.Int32
	target   *caldav.Target
	smtp     *smtpsink.Sink
	worker   *process.Worker
}

// newWorkerWorld starts the world; fault (optional) answers the server's requests first, and hold
// (optional) is the worker's HoldAfterCall.
func newWorkerWorld(t *testing.T, fault func(*http.Request) int, hold func(ctx context.Context, w *workerWorld, s process.Step)) *workerWorld {
	t.Helper()
	w := &workerWorld{pool: pgtest.NewDatabase(t)}
	var err error
	w.sink, err = caldavsink.Start(caldavsink.Config{Fault: func(r *http.Request) int {
		w.requests.Add(1)
		if fault != nil {
			return fault(r)
		}
		return 0
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.sink.Close() })
	w.target, err = caldav.New(caldav.Config{URLTemplate: w.sink.URL() + "/dav/{resource}/bookings/", AllowPrivate: true})
	require.NoError(t, err)
	cfg := process.WorkerConfig{Pool: w.pool, Steps: stepstore.NewStore(w.pool, nil), Slots: readmodel.NewStepReader(w.pool), Contacts: postgres.NewContacts(w.pool), Calendar: w.target, CallTimeout: 5 * time.Second}
	if hold != nil {
		cfg.HoldAfterCall = func(ctx context.Context, s process.Step) { hold(ctx, w, s) }
	}
	w.worker, err = process.NewWorker(cfg)
	require.NoError(t, err)
	return w
}

// newMailWorld is a migrated database, an SMTP server answering each message by fault (nil: accept)
// and a step worker with email only (no calendar target configured in this instance).
func newMailWorld(t *testing.T, fault func(smtpsink.Message) smtpsink.Fault) *workerWorld {
	t.Helper()
	w := &workerWorld{pool: pgtest.NewDatabase(t)}
	var err error
	w.smtp, err = smtpsink.Start(smtpsink.Config{Fault: fault})
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.smtp.Close() })
	mailer, err := email.New(email.Config{Addr: w.smtp.Addr(), From: "bookings@test.localhost", AllowPrivate: true})
	require.NoError(t, err)
	w.worker, err = process.NewWorker(process.WorkerConfig{Pool: w.pool, Steps: stepstore.NewStore(w.pool, nil), Slots: readmodel.NewStepReader(w.pool), Contacts: postgres.NewContacts(w.pool), Mailer: mailer, CallTimeout: 5 * time.Second})
	require.NoError(t, err)
	return w
}

// step inserts, as the planner would, a step of kind host_calendar.create for booking b at
// [start, end), and the booking's calendar row, active at the slot cal.
func (w *workerWorld) step(t *testing.T, b string, cal [2]time.Time, start, end time.Time) int64 {
	t.Helper()
	w.calendarRow(t, b, "active", cal)
	id, _ := w.insert(t, process.Step{Kind: process.CalendarCreate, Booking: b, State: process.StatePending, Start: start, End: end})
	return id
}

// calendarRow stores booking b's calendar row: status, at slot.
func (w *workerWorld) calendarRow(t *testing.T, b, status string, slot [2]time.Time) {
	t.Helper()
	_, err := w.pool.Exec(context.Background(), `INSERT INTO calendar_bookings (booking, provider, status, during) VALUES ($1, 'acuity', $2, tstzrange($3, $4))`,
		b, status, slot[0], slot[1])
	require.NoError(t, err)
}

// insert stores s (kind, thread — the booking when empty —, booking, state, after, attempts, slot) on
// resource host-1 under a new key and returns its id and key.
func (w *workerWorld) insert(t *testing.T, s process.Step) (int64, uuid.UUID) {
	t.Helper()
	key := uuid.New()
	if s.Thread == "" {
		s.Thread = s.Booking
	}
	var after *uuid.UUID
	if s.After != uuid.Nil {
		after = &s.After
	}
	var id int64
	require.NoError(t, w.pool.QueryRow(context.Background(), `INSERT INTO process_steps (key, kind, thread, booking, answers, state, after_key, attempts, resource, slot_start, slot_end)
VALUES ($1, $2, $3, $4, 'active', $5, $6, $7, 'host-1', $8, $9) RETURNING id`,
		key, string(s.Kind), s.Thread, s.Booking, string(s.State), after, s.Attempts, s.Start, s.End).Scan(&id))
	return id, key
}

// work runs the step's job once and returns what it returned and the step's state and note after.
func (w *workerWorld) work(t *testing.T, id int64) (state, note string, err error) {
	t.Helper()
	return w.workAttempt(t, id, 1)
}

// workAttempt is work as the job's attempt-th attempt (of process.DefaultMaxAttempts). The job names
// the step's booking, as the planner's jobs do.
func (w *workerWorld) workAttempt(t *testing.T, id int64, attempt int) (state, note string, err error) {
	t.Helper()
	ctx := context.Background()
	args := process.StepArgs{Step: id}
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT booking FROM process_steps WHERE id = $1`, id).Scan(&args.Booking))
	err = w.worker.Work(ctx, &river.Job[process.StepArgs]{
		JobRow: &rivertype.JobRow{Attempt: attempt, MaxAttempts: process.DefaultMaxAttempts}, Args: args})
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT state, note FROM process_steps WHERE id = $1`, id).Scan(&state, &note))
	return state, note, err
}

// A step runs only while the calendar still says what it was planned for. The calendar moves on
// before the process projection does (an Acuity move, applied by the calendar's runner first), so a
// worker can take a create planned for the old slot: it is skipped, and the CalDAV server hears
// nothing of it. A step whose slot the calendar still has is carried out, by the same worker.
func TestWorkerSkipsAStepTheCalendarMovedAwayFrom(t *testing.T) {
	t.Parallel()
	w := newWorkerWorld(t, nil, nil)
	old := time.Date(2031, 3, 3, 9, 0, 0, 0, time.UTC)
	moved := [2]time.Time{old.Add(2 * time.Hour), old.Add(3 * time.Hour)}
	// Moved so that only the start differs, or only the end.
	for _, c := range [][2]time.Time{{old, moved[1]}, {moved[0], moved[1].Add(time.Hour)}} {
		state, note, err := w.work(t, w.step(t, "acuity-moved-"+c[0].Format("1504")+c[1].Format("1504"), moved, c[0], c[1]))
		require.NoError(t, err)
		assert.Equal(t, "skipped", state)
		assert.Contains(t, note, "no longer active at this slot")
	}
	assert.Zero(t, w.requests.Load(), "nothing was sent for the old slots")

	state, _, err := w.work(t, w.step(t, "acuity-kept", moved, moved[0], moved[1]))
	require.NoError(t, err)
	assert.Equal(t, "done", state)
	require.Len(t, w.sink.Store.Objects(), 1)
	assert.True(t, w.sink.Store.Objects()[0].Start.Equal(moved[0]))
}

// roundTrips counts the round trips a pool's connections make while on: a statement, or a batch.
type roundTrips struct {
	on atomic.Bool
	n  atomic.Int32
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if r.on.Load() {
		r.n.Add(1)
	}
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	if r.on.Load() {
		r.n.Add(1)
	}
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// A claim takes two round trips: BEGIN, the locking read and the booking's calendar row go together,
// and the claiming write with COMMIT. A job from before jobs named their booking reads the row on its
// own, a third, and claims the same: both steps are done, each created once.
func TestWorkerClaimsInTwoRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorkerWorld(t, nil, nil)
	cfg, err := pgxpool.ParseConfig(w.pool.Config().ConnString())
	require.NoError(t, err)
	var trips roundTrips
	cfg.ConnConfig.Tracer = &trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	worker, err := process.NewWorker(process.WorkerConfig{Pool: pool, Steps: stepstore.NewStore(pool, nil), Slots: readmodel.NewStepReader(pool),
		Contacts: postgres.NewContacts(pool), Calendar: w.target, CallTimeout: 5 * time.Second,
		HoldAfterRequested: func(context.Context, process.Step) { trips.on.Store(false) }})
	require.NoError(t, err)
	slot := [2]time.Time{time.Date(2031, 5, 5, 9, 0, 0, 0, time.UTC), time.Date(2031, 5, 5, 10, 0, 0, 0, time.UTC)}
	for _, c := range []struct {
		booking string
		named   bool
		trips   int32
	}{{"acuity-two-trips", true, 2}, {"acuity-old-job", false, 3}} {
		id := w.step(t, c.booking, slot, slot[0], slot[1])
		args := process.StepArgs{Step: id}
		if c.named {
			args.Booking = c.booking
		}
		trips.n.Store(0)
		trips.on.Store(true)
		require.NoError(t, worker.Work(ctx, &river.Job[process.StepArgs]{JobRow: &rivertype.JobRow{Attempt: 1, MaxAttempts: 3}, Args: args}))
		assert.Equal(t, c.trips, trips.n.Load(), "%s: round trips until the claim committed", c.booking)
		var state string
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT state FROM process_steps WHERE id = $1`, id).Scan(&state))
		assert.Equal(t, "done", state, c.booking)
	}
	assert.Len(t, w.sink.Store.Objects(), 2)
}

// A step another worker holds (requested, its lease running) is not taken: the job waits for the
// lease, and the target hears nothing.
func TestWorkerLeavesAStepUnderAnotherWorkersLease(t *testing.T) {
	t.Parallel()
	w := newWorkerWorld(t, nil, nil)
	start := time.Date(2031, 3, 4, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	id := w.step(t, "acuity-leased", slot, slot[0], slot[1])
	_, err := w.pool.Exec(context.Background(), `UPDATE process_steps SET state = 'requested', attempts = 1, lease_until = now() + interval '1 minute' WHERE id = $1`, id)
	require.NoError(t, err)

	state, _, err := w.work(t, id)
	var snooze *river.JobSnoozeError
	require.ErrorAs(t, err, &snooze, "the job waits for the lease")
	assert.Greater(t, snooze.Duration, 50*time.Second)
	assert.Equal(t, "requested", state)
	var attempts int
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT attempts FROM process_steps WHERE id = $1`, id).Scan(&attempts))
	assert.Equal(t, 1, attempts)
	assert.Zero(t, w.requests.Load())
}

// A worker's outcome is recorded only while the step is still the worker's: one that an operator
// resolved (or another worker finished) while the call was out keeps that state.
func TestWorkerDoesNotOverwriteAStepResolvedDuringItsCall(t *testing.T) {
	t.Parallel()
	w := newWorkerWorld(t, func(r *http.Request) int {
		if r.Method == http.MethodPut {
			return http.StatusServiceUnavailable // proves nothing was written: the step would go back to pending
		}
		return 0
	}, func(ctx context.Context, w *workerWorld, s process.Step) {
		_, err := w.pool.Exec(ctx, `UPDATE process_steps SET state = 'done', note = 'marked done by an operator' WHERE id = $1`, s.ID)
		require.NoError(t, err)
	})
	start := time.Date(2031, 3, 5, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	state, note, _ := w.work(t, w.step(t, "acuity-resolved", slot, slot[0], slot[1])) // the 503 asks for a retry
	assert.Equal(t, "done", state)
	assert.Equal(t, "marked done by an operator", note)
}

// A call that proved nothing was done goes back to pending and its job retries; on the job's last
// attempt the step has failed (it would otherwise stay pending with no job left to run it).
func TestWorkerGivesUpOnTheLastAttempt(t *testing.T) {
	t.Parallel()
	w := newWorkerWorld(t, func(r *http.Request) int {
		if r.Method == http.MethodPut {
			return http.StatusServiceUnavailable
		}
		return 0
	}, nil)
	start := time.Date(2031, 3, 6, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}

	state, _, err := w.workAttempt(t, w.step(t, "acuity-retried", slot, slot[0], slot[1]), process.DefaultMaxAttempts-1)
	require.Error(t, err, "River retries the job")
	assert.Equal(t, "pending", state)

	state, note, err := w.workAttempt(t, w.step(t, "acuity-given-up", slot, slot[0], slot[1]), process.DefaultMaxAttempts)
	require.NoError(t, err, "nothing left to retry")
	assert.Equal(t, "failed", state)
	assert.Equal(t, fmt.Sprintf("gave up after %d attempts", process.DefaultMaxAttempts), note)
	assert.Empty(t, w.sink.Store.Objects())
}

// NextRetry doubles the delay from RetryBase at each attempt, up to RetryMax.
func TestWorkerRetryDelaysDoubleUpToTheMax(t *testing.T) {
	t.Parallel()
	w, err := process.NewWorker(process.WorkerConfig{Pool: &pgxpool.Pool{}, Steps: stepstore.NewStore(nil, nil), Slots: readmodel.NewStepReader(nil), Contacts: postgres.NewContacts(nil), RetryBase: time.Second, RetryMax: 5 * time.Minute})
	require.NoError(t, err)
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 9: 256 * time.Second,
		10: 5 * time.Minute, 25: 5 * time.Minute} {
		before := time.Now()
		at := w.NextRetry(&river.Job[process.StepArgs]{JobRow: &rivertype.JobRow{Attempt: attempt}})
		after := time.Now()
		assert.False(t, at.Before(before.Add(want)) || at.After(after.Add(want)), "attempt %d: retry %v after, want %v", attempt, at.Sub(before), want)
	}
}

// A claim leases the step for twice the call timeout (docs/process-steps.md): the call, bounded by
// the timeout, ends inside the lease, so no other worker takes the step over while it is out.
func TestWorkerLeasesTheStepForTwiceTheCallTimeout(t *testing.T) {
	t.Parallel()
	var lease time.Duration
	w := newWorkerWorld(t, nil, func(ctx context.Context, w *workerWorld, s process.Step) {
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT lease_until - requested_at FROM process_steps WHERE id = $1`, s.ID).Scan(&lease))
	})
	start := time.Date(2031, 3, 7, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	state, _, err := w.work(t, w.step(t, "acuity-leased-by-claim", slot, slot[0], slot[1]))
	require.NoError(t, err)
	assert.Equal(t, "done", state)
	assert.Equal(t, 2*5*time.Second, lease, "the claim's lease (the world's call timeout is 5s)")
}

// A step that follows another waits for it, then acts only on what it left: after one whose outcome
// is unknown it goes to an operator too (an item of its own), after one that failed or was skipped
// there is nothing to change and it is skipped. The target hears nothing either way.
func TestWorkerFollowsItsPredecessorsOutcome(t *testing.T) {
	t.Parallel()
	w := newWorkerWorld(t, nil, nil)
	start := time.Date(2031, 3, 8, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	for i, c := range []struct{ pred, want, note string }{
		{"needs_reconciliation", "needs_reconciliation", "whose outcome is unknown: resolve that one first"},
		{"failed", "skipped", "which was failed: there is nothing to change"},
		{"skipped", "skipped", "which was skipped: there is nothing to change"},
	} {
		b := fmt.Sprintf("acuity-follows-%d", i)
		w.calendarRow(t, b, "active", slot)
		_, pred := w.insert(t, process.Step{Kind: process.CalendarCreate, Booking: b, State: process.State(c.pred), Attempts: 1, Start: start.Add(-time.Hour), End: start})
		id, key := w.insert(t, process.Step{Kind: process.CalendarUpdate, Booking: b, State: process.StatePending, After: pred, Start: slot[0], End: slot[1]})
		state, note, err := w.work(t, id)
		require.NoError(t, err)
		assert.Equal(t, c.want, state, c.pred)
		assert.Contains(t, note, c.note, c.pred)
		var items int
		require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT count(*) FROM reconciliation_items WHERE kind = 'step' AND subject = $1 AND closed_at IS NULL`,
			"step "+key.String()).Scan(&items))
		assert.Equal(t, map[bool]int{true: 1}[c.want == "needs_reconciliation"], items, c.pred)
	}
	assert.Zero(t, w.requests.Load())
}

// A step is carried out only while its booking holds the slot: one whose booking is in conflict
// (or canceled) at the very slot it was planned for is skipped, and the target hears nothing.
func TestWorkerSkipsAStepWhoseBookingNoLongerHoldsItsSlot(t *testing.T) {
	t.Parallel()
	w := newWorkerWorld(t, nil, nil)
	start := time.Date(2031, 3, 9, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	for _, status := range []string{"conflict", "canceled"} {
		w.calendarRow(t, "acuity-"+status, status, slot)
		id, _ := w.insert(t, process.Step{Kind: process.CalendarCreate, Booking: "acuity-" + status, State: process.StatePending, Start: slot[0], End: slot[1]})
		state, note, err := w.work(t, id)
		require.NoError(t, err)
		assert.Equal(t, "skipped", state, status)
		assert.Contains(t, note, "(calendar: "+status+")")
	}
	assert.Zero(t, w.requests.Load())
}

// A step found requested with its lease run out (its worker stopped after the claim, or its call's
// answer was lost) may have acted: it is probed, whatever the calendar says now. A create whose
// object is on the calendar is done without a second PUT, though its booking was canceled meanwhile
// (skipping it would leave the object there with no step that knows of it), and its first request
// time stays the first claim's.
func TestWorkerProbesARecoveredStepWhateverTheCalendarSays(t *testing.T) {
	t.Parallel()
	var puts atomic.Int32
	w := newWorkerWorld(t, func(r *http.Request) int {
		if r.Method == http.MethodPut {
			puts.Add(1)
		}
		return 0
	}, nil)
	ctx := context.Background()
	start := time.Date(2031, 3, 10, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	w.calendarRow(t, "acuity-recovered", "canceled", slot)
	id, key := w.insert(t, process.Step{Kind: process.CalendarCreate, Booking: "acuity-recovered", State: process.StateRequested, Attempts: 1, Start: slot[0], End: slot[1]})
	firstClaim := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	_, err := w.pool.Exec(ctx, `UPDATE process_steps SET requested_at = $2, lease_until = now() - interval '1 second' WHERE id = $1`, id, firstClaim)
	require.NoError(t, err)
	href, err := w.target.Href("host-1", key)
	require.NoError(t, err)
	_, err = w.target.Create(ctx, href, process.Event{UID: key.String(), Summary: "Booking acuity-recovered", Start: slot[0], End: slot[1]})
	require.NoError(t, err, "the stopped worker's PUT")
	puts.Store(0)

	state, _, err := w.work(t, id)
	require.NoError(t, err)
	assert.Equal(t, "done", state)
	assert.Zero(t, puts.Load(), "the probe found the object: no second PUT")
	var gotHref string
	var requestedAt time.Time
	var attempts int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT target_href, requested_at, attempts FROM process_steps WHERE id = $1`, id).Scan(&gotHref, &requestedAt, &attempts))
	assert.Equal(t, href, gotHref)
	assert.True(t, requestedAt.Equal(firstClaim), "requested_at is the first claim's: %s", requestedAt)
	assert.Equal(t, 2, attempts)
	assert.Len(t, w.sink.Store.Objects(), 1)
}

// A call whose answer is lost (the connection closed before any answer) has an unknown outcome: the
// step stays requested, unfinished, with the error, and its job retries. The retry probes: nothing at
// the href proves the PUT never landed, so it creates the object then. Outcomes that carry no note
// leave the step's note as it was. The unknown outcome leaves the step's lease ended, not cleared: a
// worker that stops then leaves it to the sweep.
func TestWorkerRetriesAnUnknownCreateAfterAProbe(t *testing.T) {
	t.Parallel()
	var puts atomic.Int32
	w := newWorkerWorld(t, func(r *http.Request) int {
		if r.Method == http.MethodPut && puts.Add(1) == 1 {
			panic(http.ErrAbortHandler) // the connection closes without an answer
		}
		return 0
	}, nil)
	ctx := context.Background()
	start := time.Date(2031, 3, 11, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	id := w.step(t, "acuity-lost-answer", slot, slot[0], slot[1])
	_, err := w.pool.Exec(ctx, `UPDATE process_steps SET note = 'wanted again' WHERE id = $1`, id)
	require.NoError(t, err)

	state, _, err := w.workAttempt(t, id, 1)
	require.Error(t, err, "River retries the job")
	assert.Equal(t, "requested", state)
	var finished bool
	var lastErr string
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT finished_at IS NOT NULL, last_error FROM process_steps WHERE id = $1`, id).Scan(&finished, &lastErr))
	assert.False(t, finished, "an unknown outcome is not finished")
	assert.Contains(t, lastErr, "caldav PUT")
	// Had the worker stopped right after recording it (no job of the step left to run), the sweep
	// would find it: requested, its lease ended.
	_, err = jobs.Migrate(ctx, w.pool, nil)
	require.NoError(t, err)
	client, err := stepstore.InsertOnlyClient(w.pool)
	require.NoError(t, err)
	swept, err := stepstore.Sweep(ctx, w.pool, client, 0, process.DefaultMaxAttempts)
	require.NoError(t, err)
	assert.Equal(t, 1, swept)

	state, note, err := w.workAttempt(t, id, 2)
	require.NoError(t, err)
	assert.Equal(t, "done", state)
	assert.Equal(t, "wanted again", note, "outcomes that say nothing keep the step's note")
	assert.EqualValues(t, 2, puts.Load())
	assert.Len(t, w.sink.Store.Objects(), 1)
}

// An email step writes to the invitee the provider named (the contacts row), by name, saying what
// the step answers; the message's id is the step's key. Without a contact there is nobody to write to
// and the step fails; a message the server refuses for good fails; one it refuses for now (4xx) is
// retried. A step of a target this instance has no configuration for waits, pending, for an instance
// that has (its job retries): the target may be configured elsewhere.
func TestWorkerEmailsTheInvitee(t *testing.T) {
	t.Parallel()
	w := newMailWorld(t, func(m smtpsink.Message) smtpsink.Fault {
		switch {
		case strings.Contains(m.Subject, "09:00-10:00"):
			return smtpsink.PermFail
		case strings.Contains(m.Subject, "11:00-12:00"):
			return smtpsink.TempFail
		}
		return smtpsink.Accept
	})
	ctx := context.Background()
	day := time.Date(2031, 3, 12, 0, 0, 0, 0, time.UTC)
	at := func(h int) [2]time.Time {
		return [2]time.Time{day.Add(time.Duration(h) * time.Hour), day.Add(time.Duration(h+1) * time.Hour)}
	}
	step := func(b string, kind process.Kind, slot [2]time.Time, contact bool) (int64, uuid.UUID) {
		t.Helper()
		w.calendarRow(t, b, "active", slot)
		if contact {
			_, err := w.pool.Exec(ctx, `INSERT INTO contacts (booking, email, name) VALUES ($1, $2, 'Ada')`, b, b+"@invitee.test")
			require.NoError(t, err)
		}
		return w.insert(t, process.Step{Kind: kind, Booking: b, State: process.StatePending, Start: slot[0], End: slot[1]})
	}

	for _, c := range []struct {
		kind    process.Kind
		subject string
	}{{process.EmailConfirmation, "Booking confirmed: Wed 12 Mar 2031 14:00-15:00 UTC"}, {process.EmailRescheduled, "Booking rescheduled: Wed 12 Mar 2031 14:00-15:00 UTC"}} {
		b := "calendly-mail-" + strings.ReplaceAll(string(c.kind), ".", "-")
		id, key := step(b, c.kind, at(14), true)
		state, _, err := w.work(t, id)
		require.NoError(t, err)
		assert.Equal(t, "done", state)
		msgs := w.smtp.Delivered()
		require.NotEmpty(t, msgs)
		m := msgs[len(msgs)-1]
		assert.Equal(t, []string{b + "@invitee.test"}, m.To)
		assert.Equal(t, c.subject, m.Subject)
		assert.Equal(t, "<"+process.MessageID(key)+">", m.MessageID)
		assert.Contains(t, string(m.Data), "Hello Ada,")
	}

	id, _ := step("calendly-mail-nobody", process.EmailConfirmation, at(15), false)
	state, note, err := w.work(t, id)
	require.NoError(t, err)
	assert.Equal(t, "failed", state)
	assert.Contains(t, note, "no invitee email known")

	id, _ = step("calendly-mail-refused", process.EmailConfirmation, at(9), true)
	state, _, err = w.work(t, id)
	require.NoError(t, err)
	assert.Equal(t, "failed", state, "a 554 is final")

	id, _ = step("calendly-mail-later", process.EmailConfirmation, at(11), true)
	state, _, err = w.work(t, id)
	require.Error(t, err, "River retries the job")
	assert.Equal(t, "pending", state, "a 451 accepted nothing")

	id, _ = step("calendly-mail-calendar", process.CalendarCreate, at(16), true)
	state, _, err = w.work(t, id)
	require.Error(t, err, "River retries the job")
	assert.Equal(t, "pending", state)
	var lastErr string
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT last_error FROM process_steps WHERE id = $1`, id).Scan(&lastErr))
	assert.Equal(t, "no calendar target configured in this instance", lastErr)
	assert.Len(t, w.smtp.Delivered(), 2)
}

// An email step reads its invitee's contact in its claim's second round trip, right after COMMIT:
// the claim's two, the end of the message's data and the outcome make four (five when the contact
// was read on its own).
func TestWorkerEmailsInFourRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newMailWorld(t, nil)
	cfg, err := pgxpool.ParseConfig(w.pool.Config().ConnString())
	require.NoError(t, err)
	var trips roundTrips
	cfg.ConnConfig.Tracer = &trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	mailer, err := email.New(email.Config{Addr: w.smtp.Addr(), From: "bookings@test.localhost", AllowPrivate: true})
	require.NoError(t, err)
	worker, err := process.NewWorker(process.WorkerConfig{Pool: pool, Steps: stepstore.NewStore(pool, nil), Slots: readmodel.NewStepReader(pool),
		Contacts: postgres.NewContacts(pool), Mailer: mailer, CallTimeout: 5 * time.Second})
	require.NoError(t, err)
	slot := [2]time.Time{time.Date(2031, 5, 6, 9, 0, 0, 0, time.UTC), time.Date(2031, 5, 6, 10, 0, 0, 0, time.UTC)}
	w.calendarRow(t, "calendly-four-trips", "active", slot)
	_, err = w.pool.Exec(ctx, `INSERT INTO contacts (booking, email, name) VALUES ('calendly-four-trips', 'four@invitee.test', 'Ada')`)
	require.NoError(t, err)
	id, _ := w.insert(t, process.Step{Kind: process.EmailConfirmation, Booking: "calendly-four-trips", State: process.StatePending, Start: slot[0], End: slot[1]})

	trips.on.Store(true)
	require.NoError(t, worker.Work(ctx, &river.Job[process.StepArgs]{JobRow: &rivertype.JobRow{Attempt: 1, MaxAttempts: 3},
		Args: process.StepArgs{Step: id, Booking: "calendly-four-trips"}}))
	trips.on.Store(false)
	assert.EqualValues(t, 4, trips.n.Load(), "round trips of an email step")
	msgs := w.smtp.Delivered()
	require.Len(t, msgs, 1)
	assert.Equal(t, []string{"four@invitee.test"}, msgs[0].To)
	assert.Contains(t, string(msgs[0].Data), "Hello Ada,")
}

// A contact that cannot be read (the read fails as it runs, after the claim committed) sends nothing:
// the step goes back to pending saying why, and its job retries; the next attempt sends it, once.
func TestWorkerSendsNothingWhenTheContactCannotBeRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newMailWorld(t, nil)
	slot := [2]time.Time{time.Date(2031, 5, 7, 9, 0, 0, 0, time.UTC), time.Date(2031, 5, 7, 10, 0, 0, 0, time.UTC)}
	w.calendarRow(t, "calendly-unread", "active", slot)
	_, err := w.pool.Exec(ctx, `INSERT INTO contacts (booking, email, name) VALUES ('calendly-unread', 'unread@invitee.test', 'Ada')`)
	require.NoError(t, err)
	id, _ := w.insert(t, process.Step{Kind: process.EmailConfirmation, Booking: "calendly-unread", State: process.StatePending, Start: slot[0], End: slot[1]})
	_, err = w.pool.Exec(ctx, `ALTER TABLE contacts RENAME TO contacts_away;
CREATE FUNCTION refuse_read() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$ BEGIN RAISE EXCEPTION 'read refused'; END $$;
CREATE VIEW contacts AS SELECT booking, email, name, time_zone FROM contacts_away WHERE refuse_read()`)
	require.NoError(t, err)

	state, _, err := w.work(t, id)
	require.Error(t, err, "River retries the job")
	assert.Equal(t, "pending", state)
	var lastErr string
	var attempts int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT last_error, attempts FROM process_steps WHERE id = $1`, id).Scan(&lastErr, &attempts))
	assert.Contains(t, lastErr, "read contact")
	assert.Contains(t, lastErr, "read refused")
	assert.Equal(t, 1, attempts, "the claim committed")
	assert.Empty(t, w.smtp.Delivered())

	_, err = w.pool.Exec(ctx, `DROP VIEW contacts; ALTER TABLE contacts_away RENAME TO contacts`)
	require.NoError(t, err)
	state, _, err = w.workAttempt(t, id, 2)
	require.NoError(t, err)
	assert.Equal(t, "done", state)
	require.Len(t, w.smtp.Delivered(), 1)
	assert.Equal(t, []string{"unread@invitee.test"}, w.smtp.Delivered()[0].To)
}

// A CalDAV answer that refuses the request for good (a 403) fails the step; a calendar-only
// instance leaves an email step pending for an instance that can send it.
func TestWorkerFailsWhatTheTargetRefusesAndLeavesWhatItCannotReach(t *testing.T) {
	t.Parallel()
	w := newWorkerWorld(t, func(r *http.Request) int {
		if r.Method == http.MethodPut {
			return http.StatusForbidden
		}
		return 0
	}, nil)
	start := time.Date(2031, 3, 13, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	state, _, err := w.work(t, w.step(t, "acuity-forbidden", slot, slot[0], slot[1]))
	require.NoError(t, err)
	assert.Equal(t, "failed", state)

	w.calendarRow(t, "acuity-mail-elsewhere", "active", slot)
	id, _ := w.insert(t, process.Step{Kind: process.EmailConfirmation, Booking: "acuity-mail-elsewhere", State: process.StatePending, Start: slot[0], End: slot[1]})
	state, _, err = w.work(t, id)
	require.Error(t, err, "River retries the job")
	assert.Equal(t, "pending", state)
}

// object returns the sink's object at href.
func (w *workerWorld) object(t *testing.T, href string) (caldavsink.Object, bool) {
	t.Helper()
	for _, o := range w.sink.Store.Objects() {
		if strings.HasSuffix(href, o.Path) {
			return o, true
		}
	}
	return caldavsink.Object{}, false
}

// A thread's calendar steps act on one object: the href its create wrote (not an earlier create's
// that never ran), each update with the ETag of the last write before it and the next SEQUENCE,
// carrying the create's UID, until the delete removes it. A delete that finds nothing there is done;
// an update or a delete in a thread that has no object has nothing to act on and is skipped.
func TestWorkerUpdatesAndDeletesTheThreadsObject(t *testing.T) {
	t.Parallel()
	w := newWorkerWorld(t, nil, nil)
	day := time.Date(2031, 3, 14, 0, 0, 0, 0, time.UTC)
	at := func(h, d int) [2]time.Time {
		return [2]time.Time{day.Add(time.Duration(h) * time.Hour), day.Add(time.Duration(h+d) * time.Hour)}
	}
	run := func(s process.Step, want string) (int64, uuid.UUID) {
		t.Helper()
		id, key := w.insert(t, s)
		state, note, err := w.work(t, id)
		require.NoError(t, err)
		require.Equal(t, want, state, "%s of %s: %s", s.Kind, s.Booking, note)
		return id, key
	}
	const thread = "calendly-obj-1"
	w.insert(t, process.Step{Kind: process.CalendarCreate, Thread: thread, Booking: thread, State: process.StateSkipped, Start: day, End: day.Add(time.Hour)})
	slots := [][2]time.Time{at(9, 1), at(12, 1), at(12, 2)} // moved, then only its end
	for i, b := range []string{thread, "calendly-obj-2", "calendly-obj-3"} {
		w.calendarRow(t, b, "active", slots[i])
	}
	createID, createKey := run(process.Step{Kind: process.CalendarCreate, Thread: thread, Booking: thread, State: process.StatePending, Start: slots[0][0], End: slots[0][1]}, "done")
	var href string
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT target_href FROM process_steps WHERE id = $1`, createID).Scan(&href))
	after := createKey
	for i, b := range []string{"calendly-obj-2", "calendly-obj-3"} {
		_, after = run(process.Step{Kind: process.CalendarUpdate, Thread: thread, Booking: b, State: process.StatePending, After: after, Start: slots[i+1][0], End: slots[i+1][1]}, "done")
		o, ok := w.object(t, href)
		require.True(t, ok)
		assert.Equal(t, createKey.String(), o.UID)
		assert.True(t, o.Start.Equal(slots[i+1][0]) && o.End.Equal(slots[i+1][1]), "update %d: %s", i+1, o)
		assert.Contains(t, string(o.Data), fmt.Sprintf("SEQUENCE:%d", i+1))
	}
	run(process.Step{Kind: process.CalendarDelete, Thread: thread, Booking: "calendly-obj-3", State: process.StatePending, After: after}, "done")
	assert.Empty(t, w.sink.Store.Objects())

	// A second thread's object was removed by hand: its delete finds nothing and is done.
	w.calendarRow(t, "calendly-obj-gone", "active", slots[0])
	goneID, goneKey := run(process.Step{Kind: process.CalendarCreate, Booking: "calendly-obj-gone", State: process.StatePending, Start: slots[0][0], End: slots[0][1]}, "done")
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT target_href FROM process_steps WHERE id = $1`, goneID).Scan(&href))
	require.NoError(t, w.target.Delete(context.Background(), href))
	run(process.Step{Kind: process.CalendarDelete, Booking: "calendly-obj-gone", State: process.StatePending, After: goneKey}, "done")

	// A thread whose create is recorded done without an href (marked done by an operator) has no object.
	w.calendarRow(t, "calendly-obj-none", "active", slots[1])
	_, never := w.insert(t, process.Step{Kind: process.CalendarCreate, Booking: "calendly-obj-none", State: process.StateDone, Start: slots[0][0], End: slots[0][1]})
	run(process.Step{Kind: process.CalendarUpdate, Booking: "calendly-obj-none", State: process.StatePending, After: never, Start: slots[1][0], End: slots[1][1]}, "skipped")
	run(process.Step{Kind: process.CalendarDelete, Booking: "calendly-obj-none", State: process.StatePending, After: never}, "skipped")
}

// An update and a delete read their thread's calendar object (href, ETag, SEQUENCE, the create's
// UID) in their claim's second round trip, right after COMMIT: the claim's two and the outcome make
// three round trips each (five and four when the object and the create's key were read on their own).
func TestWorkerUpdatesAndDeletesInThreeRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorkerWorld(t, nil, nil)
	cfg, err := pgxpool.ParseConfig(w.pool.Config().ConnString())
	require.NoError(t, err)
	var trips roundTrips
	cfg.ConnConfig.Tracer = &trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	worker, err := process.NewWorker(process.WorkerConfig{Pool: pool, Steps: stepstore.NewStore(pool, nil), Slots: readmodel.NewStepReader(pool),
		Contacts: postgres.NewContacts(pool), Calendar: w.target, CallTimeout: 5 * time.Second})
	require.NoError(t, err)
	const thread = "calendly-three-trips"
	slots := [][2]time.Time{{time.Date(2031, 5, 8, 9, 0, 0, 0, time.UTC), time.Date(2031, 5, 8, 10, 0, 0, 0, time.UTC)},
		{time.Date(2031, 5, 8, 11, 0, 0, 0, time.UTC), time.Date(2031, 5, 8, 12, 0, 0, 0, time.UTC)}}
	w.calendarRow(t, thread, "active", slots[0])
	w.calendarRow(t, thread+"-moved", "active", slots[1])
	createID, createKey := w.insert(t, process.Step{Kind: process.CalendarCreate, Thread: thread, Booking: thread, State: process.StatePending, Start: slots[0][0], End: slots[0][1]})
	state, note, err := w.work(t, createID)
	require.NoError(t, err)
	require.Equal(t, "done", state, note)

	count := func(s process.Step) {
		t.Helper()
		id, _ := w.insert(t, s)
		trips.n.Store(0)
		trips.on.Store(true)
		require.NoError(t, worker.Work(ctx, &river.Job[process.StepArgs]{JobRow: &rivertype.JobRow{Attempt: 1, MaxAttempts: 3},
			Args: process.StepArgs{Step: id, Booking: s.Booking}}))
		trips.on.Store(false)
		assert.EqualValues(t, 3, trips.n.Load(), "round trips of a %s", s.Kind)
		require.NoError(t, w.pool.QueryRow(ctx, `SELECT state, note FROM process_steps WHERE id = $1`, id).Scan(&state, &note))
		require.Equal(t, "done", state, note)
	}
	count(process.Step{Kind: process.CalendarUpdate, Thread: thread, Booking: thread + "-moved", State: process.StatePending, After: createKey, Start: slots[1][0], End: slots[1][1]})
	objects := w.sink.Store.Objects()
	require.Len(t, objects, 1)
	assert.Equal(t, createKey.String(), objects[0].UID)
	assert.True(t, objects[0].Start.Equal(slots[1][0]), "moved: %s", objects[0])
	assert.Contains(t, string(objects[0].Data), "SEQUENCE:1")
	var updateKey uuid.UUID
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT key FROM process_steps WHERE thread = $1 AND kind = 'host_calendar.update'`, thread).Scan(&updateKey))
	w.calendarRow(t, thread+"-canceled", "canceled", slots[1])
	count(process.Step{Kind: process.CalendarDelete, Thread: thread, Booking: thread + "-canceled", State: process.StatePending, After: updateKey})
	assert.Empty(t, w.sink.Store.Objects())
}

// What is at the href decides when a write's precondition fails (412). A create whose object is
// already there with its UID (an earlier PUT whose answer was lost) is done; another UID there is for
// an operator. So is an update whose object someone else moved since our write (its ETag differs).
func TestWorkerResolvesAFailedPreconditionByWhatIsThere(t *testing.T) {
	t.Parallel()
	w := newWorkerWorld(t, nil, nil)
	ctx := context.Background()
	day := time.Date(2031, 3, 15, 0, 0, 0, 0, time.UTC)
	slot := [2]time.Time{day.Add(9 * time.Hour), day.Add(10 * time.Hour)}
	for _, c := range []struct {
		b, want string
		uid     func(uuid.UUID) string
	}{
		{"calendly-pre-ours", "done", func(k uuid.UUID) string { return k.String() }},
		{"calendly-pre-theirs", "needs_reconciliation", func(uuid.UUID) string { return "someone-else" }},
	} {
		w.calendarRow(t, c.b, "active", slot)
		id, key := w.insert(t, process.Step{Kind: process.CalendarCreate, Booking: c.b, State: process.StatePending, Start: slot[0], End: slot[1]})
		href, err := w.target.Href("host-1", key)
		require.NoError(t, err)
		_, err = w.target.Create(ctx, href, process.Event{UID: c.uid(key), Summary: "put before the step ran", Start: slot[0], End: slot[1]})
		require.NoError(t, err)
		state, note, err := w.work(t, id)
		require.NoError(t, err)
		assert.Equal(t, c.want, state, "%s: %s", c.b, note)
	}

	const b = "calendly-moved-by-hand"
	w.calendarRow(t, b, "active", slot)
	id, key := w.insert(t, process.Step{Kind: process.CalendarCreate, Booking: b, State: process.StatePending, Start: slot[0], End: slot[1]})
	state, _, err := w.work(t, id)
	require.NoError(t, err)
	require.Equal(t, "done", state)
	var href, etag string
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT target_href, target_etag FROM process_steps WHERE id = $1`, id).Scan(&href, &etag))
	_, err = w.target.Update(ctx, href, etag, process.Event{UID: key.String(), Summary: "moved by hand", Start: slot[0].Add(time.Hour), End: slot[1].Add(time.Hour)})
	require.NoError(t, err)
	moved := [2]time.Time{slot[0].Add(3 * time.Hour), slot[1].Add(3 * time.Hour)}
	_, err = w.pool.Exec(ctx, `UPDATE calendar_bookings SET during = tstzrange($2, $3) WHERE booking = $1`, b, moved[0], moved[1])
	require.NoError(t, err)
	id, _ = w.insert(t, process.Step{Kind: process.CalendarUpdate, Booking: b, State: process.StatePending, After: key, Start: moved[0], End: moved[1]})
	state, note, err := w.work(t, id)
	require.NoError(t, err)
	assert.Equal(t, "needs_reconciliation", state)
	assert.Contains(t, note, "changed by someone else")
	o, ok := w.object(t, href)
	require.True(t, ok)
	assert.Equal(t, "moved by hand", o.Summary, "the other writer's object is left as it is")
}

// A thread's object is the one its create wrote. A create that the server refused (403: nothing
// written, though the step records the href it tried) is not it: after the booking moved and a new
// create wrote at another href, an update moves that object and a cancel's delete removes it. They
// went to the refused create's href instead: the update found nothing there (412, "changed by someone
// else", for an operator) and the delete found nothing and was done, leaving the canceled booking's
// event on the host's calendar.
func TestWorkerActsOnTheObjectTheThreadsCreateWrote(t *testing.T) {
	t.Parallel()
	var refuse atomic.Value
	refuse.Store("")
	w := newWorkerWorld(t, func(r *http.Request) int {
		if key := refuse.Load().(string); key != "" && r.Method == http.MethodPut && strings.Contains(r.URL.Path, key) {
			return http.StatusForbidden
		}
		return 0
	}, nil)
	day := time.Date(2031, 3, 16, 0, 0, 0, 0, time.UTC)
	slot := func(h int) [2]time.Time {
		return [2]time.Time{day.Add(time.Duration(h) * time.Hour), day.Add(time.Duration(h+1) * time.Hour)}
	}
	run := func(s process.Step, want string) uuid.UUID {
		t.Helper()
		s.State = process.StatePending
		id, key := w.insert(t, s)
		state, note, err := w.work(t, id)
		require.NoError(t, err)
		require.Equal(t, want, state, "%s of %s: %s", s.Kind, s.Booking, note)
		return key
	}
	// thread's first booking's create is refused; the booking moves (to its second booking) and that
	// create writes the thread's object.
	created := func(thread string, h int) uuid.UUID {
		t.Helper()
		w.calendarRow(t, thread, "active", slot(h))
		w.calendarRow(t, thread+"-moved", "active", slot(h+1))
		id, key := w.insert(t, process.Step{Kind: process.CalendarCreate, Thread: thread, Booking: thread, State: process.StatePending, Start: slot(h)[0], End: slot(h)[1]})
		refuse.Store(key.String())
		state, _, err := w.work(t, id)
		require.NoError(t, err)
		require.Equal(t, "failed", state)
		refuse.Store("") // the server takes writes again
		return run(process.Step{Kind: process.CalendarCreate, Thread: thread, Booking: thread + "-moved", Start: slot(h + 1)[0], End: slot(h + 1)[1]}, "done")
	}

	const moved = "calendly-refused-then-moved"
	create := created(moved, 9)
	w.calendarRow(t, moved+"-again", "active", slot(12))
	run(process.Step{Kind: process.CalendarUpdate, Thread: moved, Booking: moved + "-again", After: create, Start: slot(12)[0], End: slot(12)[1]}, "done")
	objects := w.sink.Store.Objects()
	require.Len(t, objects, 1)
	assert.Equal(t, create.String(), objects[0].UID)
	assert.True(t, objects[0].Start.Equal(slot(12)[0]), "the update moved the object: %s", objects[0])

	const canceled = "calendly-refused-then-canceled"
	create = created(canceled, 14)
	require.Len(t, w.sink.Store.Objects(), 2)
	run(process.Step{Kind: process.CalendarDelete, Thread: canceled, Booking: canceled + "-moved", After: create}, "done")
	objects = w.sink.Store.Objects()
	require.Len(t, objects, 1, "the canceled booking's event is gone")
	assert.Equal(t, moved, strings.TrimPrefix(objects[0].Summary, "Booking ")[:len(moved)])
}

// A create whose PUT may have landed (its answer was lost) stays unknown until something is known:
// a probe the server does not answer (503) proves nothing about that PUT. The step stays requested
// (effected, so a cancel plans the delete after it) and after the last attempt goes to an operator.
// It went back to pending: a cancel then skipped it and planned no delete, and the last attempt
// recorded failed — nothing happened — with the event on the host's calendar.
func TestWorkerKeepsARecoveredCreateUnknownWhileItsProbeFails(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	w := newWorkerWorld(t, func(*http.Request) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return 0
	}, nil)
	ctx := context.Background()
	start := time.Date(2031, 3, 17, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	w.calendarRow(t, "acuity-probe-down", "active", slot)
	id, key := w.insert(t, process.Step{Kind: process.CalendarCreate, Booking: "acuity-probe-down", State: process.StateRequested, Attempts: 1, Start: slot[0], End: slot[1]})
	href, err := w.target.Href("host-1", key)
	require.NoError(t, err)
	_, err = w.target.Create(ctx, href, process.Event{UID: key.String(), Summary: "Booking acuity-probe-down", Start: slot[0], End: slot[1]})
	require.NoError(t, err, "the PUT whose answer was lost")
	down.Store(true)

	_, err = w.pool.Exec(ctx, `UPDATE process_steps SET lease_until = now() - interval '1 second' WHERE id = $1`, id)
	require.NoError(t, err)
	state, note, err := w.workAttempt(t, id, 2)
	require.Error(t, err, "River retries the job")
	require.Equal(t, "requested", state, note)
	state, note, err = w.workAttempt(t, id, process.DefaultMaxAttempts)
	require.NoError(t, err)
	assert.Equal(t, "needs_reconciliation", state)
	assert.Contains(t, note, "outcome unknown after")
	assert.Len(t, w.sink.Store.Objects(), 1, "the event is on the calendar")
}

// A message whose fate is unknown (the connection closed after its data) is for an operator at once:
// the step needs reconciliation with an item naming the Message-ID to look for, and its job ends —
// it is never sent again by itself.
func TestWorkerHandsAnUnknownEmailToAnOperatorAtOnce(t *testing.T) {
	t.Parallel()
	w := newMailWorld(t, func(smtpsink.Message) smtpsink.Fault { return smtpsink.DropAfterData })
	ctx := context.Background()
	start := time.Date(2031, 3, 18, 9, 0, 0, 0, time.UTC)
	slot := [2]time.Time{start, start.Add(time.Hour)}
	w.calendarRow(t, "calendly-mail-dropped", "active", slot)
	_, err := w.pool.Exec(ctx, `INSERT INTO contacts (booking, email, name) VALUES ('calendly-mail-dropped', 'ada@invitee.test', 'Ada')`)
	require.NoError(t, err)
	id, key := w.insert(t, process.Step{Kind: process.EmailConfirmation, Booking: "calendly-mail-dropped", State: process.StatePending, Start: slot[0], End: slot[1]})

	state, note, err := w.work(t, id)
	require.NoError(t, err, "nothing for River to retry")
	assert.Equal(t, "needs_reconciliation", state)
	assert.Contains(t, note, "check the mail server for Message-ID <"+process.MessageID(key)+">")
	var reason string
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT reason FROM reconciliation_items WHERE kind = 'step' AND subject = $1 AND closed_at IS NULL`,
		"step "+key.String()).Scan(&reason))
	assert.Contains(t, reason, process.MessageID(key))
	assert.Len(t, w.smtp.Messages(), 1)
}
