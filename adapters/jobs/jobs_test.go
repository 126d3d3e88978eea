package jobs_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/jobs"
	"bookingledger/adapters/jobs/jobstest"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/acuity"
	"bookingledger/adapters/providers/acuity/acuitytest"
	"bookingledger/domain/ledger"
)

const (
	userID = "11145481"
	apiKey = "9f1c2b7e4a6d3085c1e2f4a7b9d0c3e5"
	apptID = 1148237562
)

// fixedRetry retries after a short fixed delay, so that tests see River's retry path in milliseconds.
type fixedRetry time.Duration

func (f fixedRetry) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(time.Duration(f)) }

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type env struct {
	pool  *pgxpool.Pool
	api   *acuitytest.Server
	queue *jobs.Queue
	logs  *syncBuffer
	clock atomic.Pointer[time.Time] // the time of each attempt; tests move it between runs
}

func (e *env) setClock(t time.Time) { e.clock.Store(&t) }
func (e *env) now() time.Time       { return *e.clock.Load() }

// newEnv is a migrated database (ours and River's), a fake Acuity API knowing the appointment, and a
// queue with maxAttempts attempts, 10 ms apart.
func newEnv(t *testing.T, maxAttempts int) *env {
	t.Helper()
	pool := pgtest.NewDatabaseWith(t, jobstest.Template)
	_, err := jobs.Migrate(context.Background(), pool, nil) // a no-op unless River's migrations changed since the template
	require.NoError(t, err)
	return newEnvOn(t, pool, maxAttempts)
}

func newEnvOn(t *testing.T, pool *pgxpool.Pool, maxAttempts int) *env {
	t.Helper()
	e := &env{pool: pool, api: acuitytest.New(t, userID, apiKey), logs: &syncBuffer{}}
	e.setClock(time.Date(2025, 6, 10, 8, 0, 0, 0, time.UTC))
	e.api.Put(acuitytest.Appointment{ID: apptID, Start: time.Date(2025, 6, 30, 10, 15, 0, 0, time.FixedZone("", 3600)),
		Duration: 30 * time.Minute, CalendarID: 4417311, AppointmentTypeID: 21870436,
		Created: time.Date(2025, 6, 2, 14, 3, 11, 0, time.FixedZone("", -5*3600))})
	p, err := acuity.New(acuity.Config{Keys: providers.NewSecrets(apiKey), UserID: userID, APIURL: e.api.URL,
		AttemptTimeout: time.Second})
	require.NoError(t, err)
	q, err := jobs.New(jobs.Config{
		Pool:         pool,
		Ledger:       ledger.NewService(postgres.NewStore(pool), eventcodec.JSON{}),
		Receipts:     postgres.NewStore(pool),
		Refetchers:   []jobs.Refetcher{p},
		Logger:       slog.New(slog.NewJSONHandler(e.logs, nil)),
		MaxAttempts:  maxAttempts,
		RetryPolicy:  fixedRetry(10 * time.Millisecond),
		PollInterval: 50 * time.Millisecond,
		StopTimeout:  2 * time.Second,
		Clock:        e.now,
	})
	require.NoError(t, err)
	e.queue = q
	return e
}

// start runs the workers until the end of the test and returns the channel of finished jobs.
func (e *env) start(t *testing.T) <-chan *river.Event {
	t.Helper()
	events, cancel := e.queue.Client().Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed,
		river.EventKindJobCancelled, river.EventKindJobSnoozed)
	t.Cleanup(cancel)
	require.NoError(t, e.queue.Start(context.Background()))
	t.Cleanup(func() { assert.NoError(t, e.queue.Stop(context.Background())) })
	return events
}

// waitAny returns the next job event.
func waitAny(t *testing.T, events <-chan *river.Event) *river.Event {
	t.Helper()
	select {
	case ev := <-events:
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no job event within 20 s")
		return nil
	}
}

func wait(t *testing.T, events <-chan *river.Event, kind river.EventKind) *river.Event {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Kind == kind {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event within 20 s", kind)
		}
	}
}

// deferred is the receipt the ingress hands to Defer for a verified "rescheduled" delivery.
func deferred(action string) (ledger.Receipt, providers.Verified) {
	body := []byte(fmt.Sprintf("action=%s&id=%d&calendarID=4417311&appointmentTypeID=21870436", action, apptID))
	v := providers.VerifiedBy(providers.NewSecrets(apiKey), 0, time.Time{})
	return ledger.Receipt{
		Provider:   acuity.Name,
		ReceivedAt: time.Date(2025, 6, 10, 7, 59, 0, 0, time.UTC),
		DeliveryID: fmt.Sprintf("acuity:%s:%d", action, apptID),
		Secret:     v.Label(),
		Reason:     "mapping deferred: acuity HTTP 503",
		Body:       body,
		Headers:    []ledger.Header{{Name: "User-Agent", Value: "Acuity Scheduling"}, {Name: "X-Acuity-Signature", Value: "c2lnbmF0dXJl"}},
	}, v
}

type receiptRow struct {
	ID         int64
	Outcome    string
	Reason     string
	DeliveryID string
	Bookings   []string
	Body       []byte
	Headers    []string
}

func (e *env) receipts(t *testing.T) []receiptRow {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT id, outcome, reason, delivery_id, bookings, receipt_body(body, body_digest), headers FROM receipts ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []receiptRow
	for rows.Next() {
		var r receiptRow
		require.NoError(t, rows.Scan(&r.ID, &r.Outcome, &r.Reason, &r.DeliveryID, &r.Bookings, &r.Body, &r.Headers))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

func (e *env) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func TestDeferStoresTheReceiptAndTheJobTogether(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	r, v := deferred("rescheduled")
	res, err := e.queue.Defer(context.Background(), r, v)
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeDeferred, res.Outcome)

	got := e.receipts(t)
	require.Len(t, got, 1)
	assert.Equal(t, "deferred", got[0].Outcome)
	assert.Equal(t, r.Body, got[0].Body, "the verified body is kept")
	assert.Equal(t, []string{"User-Agent: Acuity Scheduling", "X-Acuity-Signature: c2lnbmF0dXJl"}, got[0].Headers, "and its headers")
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM river_job WHERE kind = 'bookingledger.refetch_deferred'
    AND queue = 'deferred' AND (args->>'receipt_id')::bigint = $1 AND args->>'provider' = 'acuity'
    AND (args->>'secret_index')::int = $2 AND max_attempts = 3`, got[0].ID, v.SecretIndex))
	assert.Equal(t, 0, e.count(t, `SELECT count(*) FROM river_job WHERE args::text LIKE '%' || $1 || '%'`, apiKey),
		"the job carries no secret")
}

func TestDeferIsAllOrNothing(t *testing.T) {
	t.Parallel()
	// River's schema is missing, so the job insert fails after the receipt insert: neither may stay.
	e := newEnvOn(t, pgtest.NewDatabase(t), 3)
	r, v := deferred("rescheduled")
	_, err := e.queue.Defer(context.Background(), r, v)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "insert job")
	assert.Empty(t, e.receipts(t), "the receipt rolled back with the job")
}

func TestDeferRefusesAProviderThatCannotRefetch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	r, v := deferred("rescheduled")
	r.Provider = "calendly"
	_, err := e.queue.Defer(context.Background(), r, v)
	require.Error(t, err)
	assert.Empty(t, e.receipts(t))
}

func TestFetchFailuresThenRetryAppendsTheEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	e.api.FailAll(http.StatusServiceUnavailable)
	r, v := deferred("rescheduled")
	_, err := e.queue.Defer(context.Background(), r, v)
	require.NoError(t, err)
	events := e.start(t)

	failed := wait(t, events, river.EventKindJobFailed)
	assert.Equal(t, 1, failed.Job.Attempt)
	wait(t, events, river.EventKindJobFailed) // River retried with its backoff; still down
	assert.Equal(t, 0, e.count(t, `SELECT count(*) FROM events`), "never mapped without data")
	e.api.Recover()
	// An attempt already under way when the API recovered may still fail (10 ms apart, on a loaded
	// machine): count those, so the test says what happened instead of racing the retry.
	late := 0
	var done *river.Event
	for done == nil {
		ev := waitAny(t, events)
		switch ev.Kind {
		case river.EventKindJobFailed:
			late++
		case river.EventKindJobCompleted:
			done = ev
		}
	}
	require.LessOrEqual(t, late, 1, "at most the attempt in flight at recovery fails")
	assert.Equal(t, 3+late, done.Job.Attempt)

	got := e.receipts(t)
	require.Len(t, got, 2, "the deferred receipt and the one that finished it")
	assert.Equal(t, "deferred", got[0].Outcome)
	assert.Equal(t, "accepted", got[1].Outcome)
	assert.Equal(t, fmt.Sprintf("fetched on attempt %d for deferred receipt %d", done.Job.Attempt, got[0].ID), got[1].Reason)
	assert.Equal(t, got[0].DeliveryID, got[1].DeliveryID, "both found under one delivery id")
	assert.Equal(t, []string{fmt.Sprintf("acuity-%d", apptID), fmt.Sprintf("acuity-%d", apptID)}, got[1].Bookings)
	assert.Equal(t, r.Body, got[1].Body)
	assert.Equal(t, got[0].Headers, got[1].Headers, "the finishing receipt keeps the request's headers")
	assert.NotEmpty(t, got[1].Headers)

	rows, err := e.pool.Query(context.Background(), `SELECT event_type FROM events ORDER BY version`)
	require.NoError(t, err)
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"booking.rescheduled.v1", "booking.scheduled.v1"}, types)
	var email, name string
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT email, name FROM contacts WHERE booking = $1`,
		fmt.Sprintf("acuity-%d", apptID)).Scan(&email, &name), "the fetched client's contact is kept for the email steps")
	assert.Equal(t, "ada.lovelace@example.com", email)
	assert.Equal(t, "Ada Lovelace", name)
	assert.Contains(t, e.logs.String(), `"msg":"deferred delivery not fetched yet; River retries it"`)
	assert.NotContains(t, e.logs.String(), apiKey)
}

func TestFinalFailureIsQuarantined(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	e.api.FailAll(http.StatusServiceUnavailable)
	r, v := deferred("rescheduled")
	_, err := e.queue.Defer(context.Background(), r, v)
	require.NoError(t, err)
	events := e.start(t)

	done := wait(t, events, river.EventKindJobCompleted)
	assert.Equal(t, 3, done.Job.Attempt, "two failures, then the last attempt records the outcome")
	got := e.receipts(t)
	require.Len(t, got, 2)
	assert.Equal(t, "quarantined", got[1].Outcome)
	assert.Contains(t, got[1].Reason, fmt.Sprintf("deferred receipt %d: gave up after 3 attempt(s)", got[0].ID))
	assert.Contains(t, got[1].Reason, "HTTP 503")
	assert.Equal(t, r.Body, got[1].Body, "operators find the body with the quarantined receipt")
	assert.Equal(t, 0, e.count(t, `SELECT count(*) FROM events`))
	assert.Len(t, e.api.Requests(), 3)
}

func TestUnmappableBodyIsQuarantinedWithoutRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 5)
	r, v := deferred("rescheduled")
	r.Body = []byte("action=rescheduled") // no id: can never map
	_, err := e.queue.Defer(context.Background(), r, v)
	require.NoError(t, err)
	events := e.start(t)
	done := wait(t, events, river.EventKindJobCompleted)
	assert.Equal(t, 1, done.Job.Attempt)
	got := e.receipts(t)
	require.Len(t, got, 2)
	assert.Equal(t, "quarantined", got[1].Outcome)
	assert.True(t, strings.HasPrefix(got[1].Reason, fmt.Sprintf("deferred receipt %d, attempt 1: ", got[0].ID)), got[1].Reason)
	assert.Empty(t, e.api.Requests())
}

// Copies of one delivery deferred while the API is down (a retry, a replay, changed next to
// rescheduled) make one job: later copies are duplicates of the deferral, and the one fetch finishes
// all of them.
func TestCopiesOfADeferredDeliveryShareOneJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	const copies = 4
	var ids []int64
	for i := range copies {
		r, v := deferred("changed")
		r.Booking = acuity.BookingID(strconv.Itoa(apptID))
		res, err := e.queue.Defer(context.Background(), r, v)
		require.NoError(t, err)
		if i == 0 {
			assert.Equal(t, ledger.OutcomeDeferred, res.Outcome)
		} else {
			assert.Equal(t, ledger.OutcomeDuplicate, res.Outcome)
			assert.Contains(t, res.Reason, fmt.Sprintf("duplicate of deferred receipt %d (job ", ids[0]))
		}
		got := e.receipts(t)
		ids = append(ids, got[len(got)-1].ID)
	}
	// Another action on the same appointment joins the same job: the fetch is of the appointment.
	r, v := deferred("rescheduled")
	r.Booking = acuity.BookingID(strconv.Itoa(apptID))
	res, err := e.queue.Defer(context.Background(), r, v)
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeDuplicate, res.Outcome)
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM river_job`), "one job per appointment")
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM receipts WHERE outcome = 'deferred'`))
	assert.Equal(t, copies, e.count(t, `SELECT count(*) FROM receipts WHERE outcome = 'duplicate' AND pending_booking = $1`,
		fmt.Sprintf("acuity-%d", apptID)), "every copy is receipted and named in the booking's history")

	events := e.start(t)
	wait(t, events, river.EventKindJobCompleted)
	assert.Equal(t, 2, e.count(t, `SELECT count(*) FROM events`))
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM receipts WHERE outcome = 'accepted'`))

	// Once that job completed, a new deferral is new work with a job of its own.
	r, v = deferred("changed")
	r.Booking = acuity.BookingID(strconv.Itoa(apptID))
	res, err = e.queue.Defer(context.Background(), r, v)
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeDeferred, res.Outcome)
	wait(t, events, river.EventKindJobCompleted)
	assert.Equal(t, 2, e.count(t, `SELECT count(*) FROM river_job`))
	assert.Equal(t, 2, e.count(t, `SELECT count(*) FROM events`), "the same state again: nothing new")
}

// A copy that arrives while the subject's job runs may announce a change that job fetched too early
// to see: it gets a job of its own.
func TestACopyDuringARunningFetchGetsItsOwnJob(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	pool, q := startHangingJob(t, hang)
	defer func() { close(hang); _ = q.Stop(context.Background()) }()
	r, v := deferred("rescheduled")
	res, err := q.Defer(context.Background(), r, v)
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeDeferred, res.Outcome)
	var jobsN int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job`).Scan(&jobsN))
	assert.Equal(t, 2, jobsN)
}

func TestStopCancelsAHangingAttemptWhichIsRetriedLater(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	defer close(hang)
	pool, q := startHangingJob(t, hang)
	begin := time.Now()
	require.NoError(t, q.Stop(context.Background()))
	assert.Less(t, time.Since(begin), 12*time.Second, "the soft bound and the cancel grace, not the job's hang")
	var state string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT state FROM river_job`).Scan(&state))
	assert.Contains(t, []string{"available", "retryable"}, state, "the canceled attempt is retried, not lost")
}

// startHangingJob defers one delivery to a queue whose refetch hangs until hang closes, starts the
// queue and returns once that job's attempt runs.
func startHangingJob(t *testing.T, hang chan struct{}) (*pgxpool.Pool, *jobs.Queue) {
	t.Helper()
	pool := pgtest.NewDatabaseWith(t, jobstest.Template)
	_, err := jobs.Migrate(context.Background(), pool, nil)
	require.NoError(t, err)
	started := make(chan struct{}, 2)
	q, err := jobs.New(jobs.Config{
		Pool:         pool,
		Ledger:       ledger.NewService(postgres.NewStore(pool), eventcodec.JSON{}),
		Receipts:     postgres.NewStore(pool),
		Refetchers:   []jobs.Refetcher{hangingRefetcher{started: started, hang: hang}},
		PollInterval: 50 * time.Millisecond,
		StopTimeout:  200 * time.Millisecond,
	})
	require.NoError(t, err)
	r, v := deferred("rescheduled")
	_, err = q.Defer(context.Background(), r, v)
	require.NoError(t, err)
	require.NoError(t, q.Start(context.Background()))
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not start")
	}
	return pool, q
}

type hangingRefetcher struct {
	started chan struct{}
	hang    chan struct{}
}

func (hangingRefetcher) Name() string { return acuity.Name }

func (h hangingRefetcher) Refetch(ctx context.Context, _ []byte, _ int, _ time.Time) (providers.Mapped, error) {
	h.started <- struct{}{}
	select {
	case <-ctx.Done():
		return providers.Mapped{}, fmt.Errorf("%w: %w", providers.ErrDeferred, ctx.Err())
	case <-h.hang:
		return providers.Mapped{}, providers.ErrDeferred
	}
}

func TestMigrateIsIdempotentAndSafeConcurrently(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDatabase(t)
	ctx := context.Background()
	pending, err := jobs.Pending(ctx, pool)
	require.NoError(t, err)
	require.NotEmpty(t, pending)

	var wg sync.WaitGroup
	applied := make([][]string, 3)
	errs := make([]error, 3)
	for i := range 3 {
		wg.Go(func() { applied[i], errs[i] = jobs.Migrate(ctx, pool, nil) })
	}
	wg.Wait()
	total := 0
	for i := range 3 {
		require.NoError(t, errs[i])
		total += len(applied[i])
	}
	assert.Equal(t, len(pending), total, "each version applied exactly once")
	pending, err = jobs.Pending(ctx, pool)
	require.NoError(t, err)
	assert.Empty(t, pending)
	again, err := jobs.Migrate(ctx, pool, nil)
	require.NoError(t, err)
	assert.Empty(t, again)
}

// flakyLedger fails its first n Record calls, as a store that is briefly unreachable would.
type flakyLedger struct {
	jobs.Recorder
	mu sync.Mutex
	n  int
}

func (f *flakyLedger) Record(ctx context.Context, d ledger.Delivery) (ledger.Result, error) {
	f.mu.Lock()
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		return ledger.Result{}, fmt.Errorf("record: %w", context.DeadlineExceeded)
	}
	return f.Recorder.Record(ctx, d)
}

// The last attempt must end with a receipt: if the store refuses it, the job waits (snoozes, which is
// not an attempt) instead of being discarded with the delivery finished nowhere.
func TestFinalAttemptWaitsForTheStoreToRecordItsOutcome(t *testing.T) {
	t.Parallel()
	pool := pgtest.NewDatabaseWith(t, jobstest.Template)
	_, err := jobs.Migrate(context.Background(), pool, nil)
	require.NoError(t, err)
	api := acuitytest.New(t, userID, apiKey)
	api.FailAll(http.StatusServiceUnavailable)
	p, err := acuity.New(acuity.Config{Keys: providers.NewSecrets(apiKey), UserID: userID, APIURL: api.URL})
	require.NoError(t, err)
	q, err := jobs.New(jobs.Config{
		Pool:         pool,
		Ledger:       &flakyLedger{Recorder: ledger.NewService(postgres.NewStore(pool), eventcodec.JSON{}), n: 2},
		Receipts:     postgres.NewStore(pool),
		Refetchers:   []jobs.Refetcher{p},
		MaxAttempts:  1,
		PollInterval: 50 * time.Millisecond,
		RecordRetry:  20 * time.Millisecond,
	})
	require.NoError(t, err)
	e := &env{pool: pool, api: api, queue: q}
	r, v := deferred("rescheduled")
	_, err = q.Defer(context.Background(), r, v)
	require.NoError(t, err)
	events := e.start(t)
	wait(t, events, river.EventKindJobSnoozed)
	wait(t, events, river.EventKindJobSnoozed)
	done := wait(t, events, river.EventKindJobCompleted)
	assert.Equal(t, 1, done.Job.Attempt, "snoozes are not attempts")
	got := e.receipts(t)
	require.Len(t, got, 2)
	assert.Equal(t, "quarantined", got[1].Outcome)
	assert.Contains(t, got[1].Reason, "gave up after 1 attempt(s)")
}
