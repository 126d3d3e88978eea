package jobs_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/jobs"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providers/acuity"
	"bookingledger/domain/ledger"
)

// A job River runs again after it finished (a rescue, an operator's retry), later and with the
// appointment unchanged, finishes nothing twice: its receipt is a duplicate that names the deferred
// receipt, and the stream keeps its events.
func TestASecondRunOfAFinishedJobAppendsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	r, v := deferred("rescheduled")
	_, err := e.queue.Defer(context.Background(), r, v)
	require.NoError(t, err)
	events := e.start(t)
	first := wait(t, events, river.EventKindJobCompleted)
	require.Equal(t, 2, e.count(t, `SELECT count(*) FROM events`))
	var observed string
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT convert_from(metadata, 'UTF8') FROM events WHERE event_type = 'booking.rescheduled.v1'`).Scan(&observed))
	assert.Contains(t, observed, "2025-06-10T08:00:00Z", "the observation is dated by the queue's clock")

	e.setClock(e.now().Add(3 * time.Hour))
	_, err = e.queue.Client().JobRetry(context.Background(), first.Job.ID)
	require.NoError(t, err)
	again := wait(t, events, river.EventKindJobCompleted)
	require.Equal(t, first.Job.ID, again.Job.ID)

	got := e.receipts(t)
	require.Len(t, got, 3)
	assert.Equal(t, []string{"deferred", "accepted", "duplicate"}, []string{got[0].Outcome, got[1].Outcome, got[2].Outcome})
	assert.Contains(t, got[2].Reason, fmt.Sprintf("for deferred receipt %d", got[0].ID))
	assert.Equal(t, got[0].DeliveryID, got[2].DeliveryID)
	assert.Equal(t, 2, e.count(t, `SELECT count(*) FROM events`), "nothing appended twice")
	assert.Len(t, e.api.Requests(), 2, "each run fetched once")
}

// Jobs run concurrently for one deferred receipt (two jobs naming it: a rescue while the first still
// runs) append its events once.
func TestConcurrentJobsOfOneDeferredReceiptAppendOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	r, v := deferred("rescheduled")
	_, err := e.queue.Defer(context.Background(), r, v)
	require.NoError(t, err)
	var (
		id   int64
		args []byte
	)
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT (args->>'receipt_id')::bigint, args FROM river_job`).Scan(&id, &args))
	const copies = 4
	_, err = e.pool.Exec(context.Background(), `INSERT INTO river_job (args, kind, max_attempts, queue, state)
SELECT $1, 'bookingledger.refetch_deferred', 3, 'deferred', 'available' FROM generate_series(2, $2)`, args, copies)
	require.NoError(t, err)
	events := e.start(t)
	for range copies {
		wait(t, events, river.EventKindJobCompleted)
	}
	assert.Equal(t, 2, e.count(t, `SELECT count(*) FROM events`))
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM receipts WHERE outcome = 'accepted'`))
	assert.Equal(t, copies-1, e.count(t, `SELECT count(*) FROM receipts WHERE outcome = 'duplicate' AND reason LIKE $1`,
		fmt.Sprintf("%%for deferred receipt %d", id)))
}

// A failure to record before the last attempt uses up an attempt like a failed fetch: only the last
// attempt waits (snoozes) for the store.
func TestARecordFailureBeforeTheLastAttemptIsRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	q, err := jobs.New(jobs.Config{
		Pool:         e.pool,
		Ledger:       &flakyLedger{Recorder: ledger.NewService(postgres.NewStore(e.pool), eventcodec.JSON{}), n: 1},
		Receipts:     postgres.NewStore(e.pool),
		Refetchers:   []jobs.Refetcher{acuityProvider(t, e, apiKey)},
		MaxAttempts:  3,
		RetryPolicy:  fixedRetry(10 * time.Millisecond),
		PollInterval: 50 * time.Millisecond,
		Clock:        e.now,
	})
	require.NoError(t, err)
	e.queue = q
	r, v := deferred("rescheduled")
	_, err = q.Defer(context.Background(), r, v)
	require.NoError(t, err)
	events := e.start(t)
	first := waitAny(t, events)
	require.Equal(t, river.EventKindJobFailed, first.Kind, "a failed record is a failed attempt")
	done := wait(t, events, river.EventKindJobCompleted)
	assert.Equal(t, 2, done.Job.Attempt)
	got := e.receipts(t)
	require.Len(t, got, 2)
	assert.Equal(t, "accepted", got[1].Outcome)
	assert.Equal(t, fmt.Sprintf("fetched on attempt 2 for deferred receipt %d", got[0].ID), got[1].Reason)
}

// A copy that arrives while the subject's job waits out its backoff after a failed fetch joins that
// job: its next fetch covers the copy.
func TestACopyDuringARetryBackoffJoinsTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	q, err := jobs.New(jobs.Config{
		Pool:         e.pool,
		Ledger:       ledger.NewService(postgres.NewStore(e.pool), eventcodec.JSON{}),
		Receipts:     postgres.NewStore(e.pool),
		Refetchers:   []jobs.Refetcher{acuityProvider(t, e, apiKey)},
		MaxAttempts:  3,
		RetryPolicy:  fixedRetry(time.Hour),
		PollInterval: 50 * time.Millisecond,
		StopTimeout:  2 * time.Second,
		Clock:        e.now,
	})
	require.NoError(t, err)
	e.queue = q
	e.api.FailAll(http.StatusServiceUnavailable)
	r, v := deferred("changed")
	r.Booking = acuity.BookingID(fmt.Sprint(apptID))
	_, err = q.Defer(context.Background(), r, v)
	require.NoError(t, err)
	events := e.start(t)
	failed := wait(t, events, river.EventKindJobFailed)
	require.Equal(t, rivertype.JobStateRetryable, failed.Job.State)

	res, err := q.Defer(context.Background(), r, v)
	require.NoError(t, err)
	assert.Equal(t, ledger.OutcomeDuplicate, res.Outcome)
	assert.Contains(t, res.Reason, fmt.Sprintf("(job %d)", failed.Job.ID))
	assert.Equal(t, 1, e.count(t, `SELECT count(*) FROM river_job`))
}

// With no MaxAttempts configured a deferred delivery gets DefaultMaxAttempts fetches (River's own
// default, 25, would spread them over three weeks).
func TestDeferredJobsGetTheDefaultAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 0)
	r, v := deferred("rescheduled")
	_, err := e.queue.Defer(context.Background(), r, v)
	require.NoError(t, err)
	assert.Equal(t, 12, jobs.DefaultMaxAttempts)
	assert.Equal(t, jobs.DefaultMaxAttempts, e.count(t, `SELECT max_attempts FROM river_job`))
}

// The job fetches with the secret that verified the delivery, not the newest one.
func TestTheJobFetchesWithTheSecretThatVerified(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	const newer = "0d5e7a9c1b3f5d7e9a1c3b5d7f9e1a3c"
	q, err := jobs.New(jobs.Config{
		Pool:         e.pool,
		Ledger:       ledger.NewService(postgres.NewStore(e.pool), eventcodec.JSON{}),
		Receipts:     postgres.NewStore(e.pool),
		Refetchers:   []jobs.Refetcher{acuityProvider(t, e, newer, apiKey)},
		MaxAttempts:  1,
		PollInterval: 50 * time.Millisecond,
		Clock:        e.now,
	})
	require.NoError(t, err)
	e.queue = q
	r, _ := deferred("rescheduled")
	v := providers.VerifiedBy(providers.NewSecrets(newer, apiKey), 1, time.Time{})
	r.Secret = v.Label()
	_, err = q.Defer(context.Background(), r, v)
	require.NoError(t, err)
	events := e.start(t)
	wait(t, events, river.EventKindJobCompleted)
	got := e.receipts(t)
	require.Len(t, got, 2)
	assert.Equal(t, "accepted", got[1].Outcome, got[1].Reason)
	assert.Equal(t, 2, e.count(t, `SELECT count(*) FROM receipts WHERE secret_ref = $1`, r.Secret),
		"the finishing receipt names the secret that verified the delivery, as the deferred one does")
}

// A job whose deferred receipt is gone, or is no longer a deferred one of its provider, is cancelled
// at once: nothing is fetched or recorded, and it is not retried.
func TestAJobWithoutItsDeferredReceiptIsCancelled(t *testing.T) {
	t.Parallel()
	for name, change := range map[string]string{
		"deleted":          `DELETE FROM receipts`,
		"not deferred":     `UPDATE receipts SET outcome = 'quarantined'`,
		"another provider": `UPDATE receipts SET provider = 'calendly'`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, 3)
			r, v := deferred("rescheduled")
			_, err := e.queue.Defer(context.Background(), r, v)
			require.NoError(t, err)
			_, err = e.pool.Exec(context.Background(), change)
			require.NoError(t, err)
			before := len(e.receipts(t))
			events := e.start(t)
			ev := waitAny(t, events)
			assert.Equal(t, river.EventKindJobCancelled, ev.Kind)
			assert.Equal(t, 1, ev.Job.Attempt)
			assert.Len(t, e.receipts(t), before, "nothing recorded")
			assert.Empty(t, e.api.Requests(), "nothing fetched")
		})
	}
}

// acuityProvider is an Acuity provider on e's fake API with keys, newest first.
func acuityProvider(t *testing.T, e *env, keys ...string) *acuity.Provider {
	t.Helper()
	p, err := acuity.New(acuity.Config{Keys: providers.NewSecrets(keys...), UserID: userID, APIURL: e.api.URL,
		AttemptTimeout: time.Second})
	require.NoError(t, err)
	return p
}

// What the refetch says of the delivery (an action the ledger does not map) is kept in the receipt
// that finishes it, before the deferred receipt it names.
func TestTheFinishingReceiptKeepsTheRefetchsReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 3)
	r, v := deferred("order.completed")
	_, err := e.queue.Defer(context.Background(), r, v)
	require.NoError(t, err)
	events := e.start(t)
	wait(t, events, river.EventKindJobCompleted)
	got := e.receipts(t)
	require.Len(t, got, 2)
	assert.Equal(t, "ignored", got[1].Outcome)
	assert.Equal(t, fmt.Sprintf("acuity action order.completed not mapped; fetched on attempt 1 for deferred receipt %d", got[0].ID), got[1].Reason)
	assert.Empty(t, e.api.Requests())
}
