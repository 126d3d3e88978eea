package privacy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/privacy"
	"bookingledger/adapters/providers"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

// exec runs each statement on the env's database.
func (e *env) exec(t *testing.T, qs ...string) {
	t.Helper()
	for _, q := range qs {
		_, err := e.pool.Exec(context.Background(), q)
		require.NoError(t, err, q)
	}
}

// stepsOf lists the booking's process steps as "key-suffix state last_error | note", by key.
func (e *env) stepsOf(t *testing.T, b string) []string {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT right(key::text, 1) || ' ' || state || ' ' || last_error || ' | ' || note
FROM process_steps WHERE booking = $1 ORDER BY key`, b)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// An erasure skips the booking's pending invitee e-mails (an invitee step cannot run without the
// contact), and no other step; it clears the errors of the booking's steps (a target's error can quote
// the address) and the read model's cancel reason of old events, and no other booking's. An error that
// quotes the address after the erasure is removed by erasing again, which records that erasure.
func TestEraseSkipsInviteeStepsAndClearsStepErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := spares.Database(t)
	e := newEnv(t, pool, keyA)
	e.deliver(t, "calendly-st", "st1", []byte(`{"email":"st@example.com"}`), ledger.Contact{Booking: "calendly-st", Email: "st@example.com"})
	e.deliver(t, "calendly-sk", "sk1", []byte(`{"email":"sk@example.com"}`), ledger.Contact{Booking: "calendly-sk", Email: "sk@example.com"})
	e.exec(t, `INSERT INTO process_steps (key, kind, thread, booking, answers, state, last_error) VALUES
    ('00000000-0000-4000-8000-000000000001', 'invitee_email.confirmation', 'calendly-st', 'calendly-st', 'x', 'pending', '550 <st@example.com> unknown'),
    ('00000000-0000-4000-8000-000000000002', 'invitee_email.cancellation', 'calendly-st', 'calendly-st', 'x', 'done', ''),
    ('00000000-0000-4000-8000-000000000003', 'host_calendar.create', 'calendly-st', 'calendly-st', 'x', 'pending', ''),
    ('00000000-0000-4000-8000-000000000004', 'invitee_email.confirmation', 'calendly-sk', 'calendly-sk', 'x', 'pending', '550 <sk@example.com> unknown')`,
		`INSERT INTO calendar_bookings (booking, provider, status, cancel_reason) VALUES
    ('calendly-st', 'calendly', 'canceled', 'st reason'), ('calendly-sk', 'calendly', 'canceled', 'sk reason')`)

	eraser := privacy.NewEraser(pool, e.bodies, owners(pool))
	er, err := eraser.Erase(ctx, privacy.Request{Booking: "calendly-st", By: "test"})
	require.NoError(t, err)
	assert.EqualValues(t, 1, er.Counts.StepsSkipped)
	assert.EqualValues(t, 1, er.Counts.StepErrors)
	assert.EqualValues(t, 1, er.Counts.ReadModel)
	note := "the invitee's data was erased on " + er.ErasedAt.Format("2006-01-02")
	assert.Equal(t, []string{"1 skipped [erased] | " + note, "2 done  | ", "3 pending  | "}, e.stepsOf(t, "calendly-st"))
	assert.Equal(t, []string{"4 pending 550 <sk@example.com> unknown | "}, e.stepsOf(t, "calendly-sk"), "another booking's steps stay")
	var reasons string
	require.NoError(t, pool.QueryRow(ctx, `SELECT string_agg(booking || '=' || cancel_reason, ',' ORDER BY booking) FROM calendar_bookings`).Scan(&reasons))
	assert.Equal(t, "calendly-sk=sk reason,calendly-st=", reasons)

	// The host calendar step fails later, its target quoting the address: erasing again removes it and
	// says so.
	e.exec(t, `UPDATE process_steps SET last_error = '550 <st@example.com> unknown' WHERE key = '00000000-0000-4000-8000-000000000003'`)
	again, err := eraser.Erase(ctx, privacy.Request{Booking: "calendly-st", By: "test"})
	require.NoError(t, err)
	assert.Positive(t, again.ID, "an erasure that removed something is recorded")
	assert.Equal(t, privacy.Counts{StepErrors: 1}, again.Counts)
	assert.Equal(t, []string{"1 skipped [erased] | " + note, "2 done  | ", "3 pending [erased] | "}, e.stepsOf(t, "calendly-st"))
	newest, err := eraser.Erasures(ctx, 1)
	require.NoError(t, err)
	require.Len(t, newest, 1)
	assert.Equal(t, again.ID, newest[0].ID, "a limit keeps the newest")
}

// A booking erased before anything of it arrived (or after retention took everything) is erased all
// the same: the fact is recorded, and what arrives later is kept without its personal data.
func TestEraseBeforeTheFirstDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := spares.Database(t)
	e := newEnv(t, pool, keyA)
	er, err := privacy.NewEraser(pool, e.bodies, owners(pool)).Erase(ctx, privacy.Request{Booking: "calendly-early", By: "test"})
	require.NoError(t, err)
	assert.Positive(t, er.ID)
	assert.Equal(t, privacy.Counts{}, er.Counts)
	e.deliver(t, "calendly-early", "e1", []byte(`{"email":"early@example.com"}`), ledger.Contact{Booking: "calendly-early", Email: "early@example.com"})
	assert.Nil(t, e.bodiesOf(t, "calendly-early")[0].Receipt.Body)
	assert.NotContains(t, string(dump(t, pool)), "early@example.com")
}

// By address: every booking whose contact has the address, whatever its case and the spaces around
// it, in booking order; requests that name nothing, or nobody who asks, are refused.
func TestEraseByAddressFindsEveryBookingOfIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := spares.Database(t)
	e := newEnv(t, pool, keyA)
	for b, addr := range map[booking.ID]string{"calendly-m2": "Many@Example.com", "calendly-m1": "many@example.com"} {
		e.deliver(t, b, string(b), []byte(`{"b":"`+b+`"}`), ledger.Contact{Booking: b, Email: addr})
	}
	eraser := privacy.NewEraser(pool, e.bodies, owners(pool))
	for _, bad := range []privacy.Request{{Email: " \t", By: "test"}, {Booking: "calendly-m1", By: " "}} {
		_, err := eraser.Erase(ctx, bad)
		require.ErrorIs(t, err, privacy.ErrInvalidErasure, "%+v", bad)
	}
	er, err := eraser.Erase(ctx, privacy.Request{Email: " MANY@example.com ", By: "test"})
	require.NoError(t, err)
	assert.Equal(t, []string{"calendly-m1", "calendly-m2"}, er.Bookings)
	assert.EqualValues(t, 2, er.Counts.Contacts)
	assert.NotContains(t, strings.ToLower(string(dump(t, pool))), "many@example.com")
}

// Bodies stored by a release before sealing (plain, with no subject), in receipt_bodies or inline in
// receipts (before migration 0031), of a receipt naming the booking or of a deferred receipt waiting
// for it, go with the booking; another booking's stay.
func TestEraseReachesBodiesStoredBeforeSealing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := spares.Database(t)
	old := newEnv(t, pool, "") // the release before sealing
	old.deliver(t, "calendly-legacy", "l1", []byte(`{"name":"Legacy Lou"}`), ledger.Contact{Booking: "calendly-legacy", Email: "lou@example.com"})
	old.deliver(t, "calendly-legacy", "l2", []byte(`{"name":"Legacy Lou","n":2}`))
	old.deliver(t, "calendly-other", "o1", []byte(`{"name":"Other Olga"}`))
	old.exec(t,
		`UPDATE receipts SET body = '{"name":"Inline Lou"}' WHERE delivery_id = 'l2'`,
		`WITH b AS (INSERT INTO receipt_bodies (digest, body) VALUES (sha256('{"name":"Deferred Lou"}'), '{"name":"Deferred Lou"}') RETURNING digest)
INSERT INTO receipts (provider, received_at, delivery_id, outcome, pending_booking, body_digest)
SELECT 'acuity', now(), 'd1', 'deferred', 'calendly-legacy', b.digest FROM b`,
		`INSERT INTO receipts (provider, received_at, delivery_id, outcome, pending_booking, body)
VALUES ('acuity', now(), 'd2', 'deferred', 'calendly-legacy', '{"name":"Inline Deferred Lou"}')`)
	e := newEnv(t, pool, keyA)
	er, err := privacy.NewEraser(pool, e.bodies, owners(pool)).Erase(ctx, privacy.Request{Booking: "calendly-legacy", By: "test"})
	require.NoError(t, err)
	assert.EqualValues(t, 3, er.Counts.Bodies, "two of receipts naming it, one of a deferred receipt")
	assert.EqualValues(t, 2, er.Counts.InlineBodies)
	d := string(dump(t, pool))
	assert.NotContains(t, d, "Lou")
	assert.NotContains(t, d, string(hexOf("Lou")))
	assert.Contains(t, d, string(hexOf("Other Olga")), "another booking's plain body stays")
	for _, r := range e.bodiesOf(t, "calendly-legacy") {
		assert.True(t, r.Body.Erased, "receipt %s", r.Receipt.DeliveryID)
	}
	again, err := privacy.NewEraser(pool, e.bodies, owners(pool)).Erase(ctx, privacy.Request{Booking: "calendly-legacy", By: "test"})
	require.NoError(t, err)
	assert.Equal(t, privacy.Counts{}, again.Counts, "tombstones are not counted again")
	assert.Zero(t, again.ID)
}

// Ingest and erasure of one booking serialize on its erasure lock (migration 0131, bl_subject_erased):
// a delivery waits for an erasure of its booking in flight and then stores nothing personal of it, not
// even its body. Ingest takes the lock shared, so a delivery never waits for another delivery of the
// same booking still committing: a receipt-only copy, which holds no stream lock, would otherwise
// queue behind every delivery of its booking, and in a group behind deliveries of other bookings.
func TestIngestWaitsForAnErasureOfItsBookingButNotForAnotherIngest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := spares.Database(t)
	e := newEnv(t, pool, keyA)
	const b = booking.ID("calendly-locks")
	e.deliver(t, b, "d1", []byte(`{"name":"Lock Lars"}`))
	record := func(deliveryID string, ev booking.Event, body string, contacts ...ledger.Contact) <-chan error {
		done := make(chan error, 1)
		go func() {
			_, err := e.svc.Record(ctx, ledger.Delivery{
				Receipt:  ledger.Receipt{Provider: "calendly", ReceivedAt: t0, DeliveryID: deliveryID, Secret: "0:abc", Body: []byte(body)},
				Events:   []booking.Event{ev},
				Contacts: contacts})
			done <- err
		}()
		return done
	}
	created := booking.Event{ID: eventlog.EventID(providers.EventID("calendly", string(b)+" created")), Booking: b, Provider: "calendly",
		ProviderRef: string(b) + " created", OccurredAt: t0.Add(-time.Hour), Payload: booking.Scheduled{
			Slot: booking.Slot{Meeting: "m-" + string(b), Resources: []string{"host"}, Start: t0, End: t0.Add(30 * time.Minute)}, Capacity: 1}}
	canceled := booking.Event{ID: eventlog.EventID(providers.EventID("calendly", string(b)+" canceled")), Booking: b, Provider: "calendly",
		ProviderRef: string(b) + " canceled", OccurredAt: t0, Payload: booking.Canceled{Reason: "moved", CanceledBy: "invitee"}}

	// Another delivery of the booking in flight: its transaction has asked whether the booking is erased.
	ingest, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = ingest.Rollback(ctx) }()
	var erased bool
	require.NoError(t, ingest.QueryRow(ctx, `SELECT bl_subject_erased($1)`, string(b)).Scan(&erased))
	require.False(t, erased)
	select {
	case err := <-record("d1-copy", created, `{"name":"Lock Lars","copy":1}`):
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("a delivery waited for another delivery of its booking")
	}
	require.NoError(t, ingest.Rollback(ctx))

	// An erasure of the booking in flight.
	erasure, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = erasure.Rollback(ctx) }()
	require.NoError(t, privacy.LockSubjects(ctx, erasure, []string{string(b)}))
	done := record("d2", canceled, `{"name":"Lock Lars","secret":"during-erasure"}`, ledger.Contact{Booking: b, Email: "lars@example.com", Name: "Lock Lars"})
	select {
	case err := <-done:
		t.Fatalf("a delivery did not wait for the erasure of its booking (err %v)", err)
	case <-time.After(500 * time.Millisecond):
	}
	_, err = erasure.Exec(ctx, `WITH e AS (INSERT INTO erasures (erased_by, bookings, counts) VALUES ('test', ARRAY[$1], '{}') RETURNING id)
INSERT INTO erased_subjects (subject, erasure) SELECT $1, id FROM e`, string(b))
	require.NoError(t, err)
	require.NoError(t, erasure.Commit(ctx))
	require.NoError(t, <-done)

	assert.NotContains(t, string(dump(t, pool)), "lars@example.com")
	for _, r := range e.bodiesOf(t, b) {
		if r.Receipt.DeliveryID == "d2" {
			assert.Nil(t, r.Receipt.Body, "the body of a delivery that waited for the erasure is not stored")
		}
	}
}
