package postgres_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

func bookingOf(stream string) booking.ID { return booking.ID(stream[len(booking.StreamPrefix):]) }

// withPersonal gives c a contact and a kept text of the booking of its first append.
func withPersonal(c ledger.Commit, b booking.ID, email string) ledger.Commit {
	var ev eventlog.EventID
	if len(c.Appends) > 0 {
		ev = c.Appends[0].Events[0].ID
	}
	c.Personal = ledger.Personal{
		Contacts:  []ledger.Contact{{Booking: b, Email: email, Name: "Name of " + email}},
		FreeTexts: []booking.FreeText{{Booking: b, Event: ev, Field: booking.FieldCancelReason, Text: "text of " + email}},
	}
	return c
}

func contactOf(t *testing.T, pool *pgxpool.Pool, b booking.ID) string {
	t.Helper()
	var email string
	_ = pool.QueryRow(testCtx(t), `SELECT email FROM contacts WHERE booking = $1`, string(b)).Scan(&email)
	return email
}

// A delivery's contacts and texts are written by the statement that commits it, in the group's one
// transaction: with its appends when they succeed (an idempotent re-append included), not at all when
// they conflict (the ledger decides again and commits them then), and never for an erased booking. A
// commit without appends carries none (it would lock a contact without its booking's stream).
func TestGroupCommitSavesPersonalDataWithTheDelivery(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	stored, conflicting, erased, fresh := streamName(t), streamName(t), streamName(t), streamName(t)
	storedEvent := event(t, "booking.scheduled.v1")
	_, err := s.Append(ctx, stored, eventlog.NoStream(), []eventlog.EventData{storedEvent})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `WITH e AS (INSERT INTO erasures (erased_by, bookings, counts) VALUES ('test', ARRAY[$1], '{}') RETURNING id)
INSERT INTO erased_subjects (subject, erasure) SELECT $1, id FROM e`, string(bookingOf(erased)))
	require.NoError(t, err)

	freshEvent := event(t, "booking.scheduled.v1")
	results, errs := commitHeldGroup(t, s, []ledger.Commit{
		withPersonal(commitOf("d-fresh", appendOf(fresh, eventlog.NoStream(), freshEvent)), bookingOf(fresh), "fresh@example.com"),
		withPersonal(commitOf("d-conflict", appendOf(conflicting, eventlog.Exact(5), event(t, "booking.scheduled.v1"))), bookingOf(conflicting), "conflict@example.com"),
		withPersonal(commitOf("d-redelivery", appendOf(stored, eventlog.NoStream(), storedEvent)), bookingOf(stored), "stored@example.com"),
		withPersonal(commitOf("d-erased", appendOf(erased, eventlog.NoStream(), event(t, "booking.scheduled.v1"))), bookingOf(erased), "erased@example.com"),
	})
	require.NoError(t, errs[0])
	assert.Equal(t, ledger.OutcomeAccepted, results[0].Outcome)
	assert.ErrorIs(t, errs[1], eventlog.ErrVersionConflict)
	require.NoError(t, errs[2])
	assert.Equal(t, ledger.OutcomeDuplicate, results[2].Outcome, "an idempotent re-append")
	require.NoError(t, errs[3], "an erased booking's delivery is recorded, without its personal data")

	assert.Equal(t, "fresh@example.com", contactOf(t, pool, bookingOf(fresh)))
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM free_texts WHERE booking = $1 AND text = 'text of fresh@example.com'`, string(bookingOf(fresh))))
	assert.Empty(t, contactOf(t, pool, bookingOf(conflicting)), "a conflicting delivery saves nothing until it is decided again")
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM free_texts WHERE booking = $1`, string(bookingOf(conflicting))))
	assert.Equal(t, "stored@example.com", contactOf(t, pool, bookingOf(stored)), "a redelivery refreshes the contact")
	assert.Empty(t, contactOf(t, pool, bookingOf(erased)))
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM free_texts WHERE booking = $1`, string(bookingOf(erased))))

	// A newer address wins; the kept text of an event stays the first one.
	_, err = s.Commit(ctx, withPersonal(commitOf("d-fresh-2", appendOf(fresh, eventlog.Any(), freshEvent)), bookingOf(fresh), "newer@example.com"))
	require.NoError(t, err)
	assert.Equal(t, "newer@example.com", contactOf(t, pool, bookingOf(fresh)))
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM free_texts WHERE booking = $1 AND text = 'text of fresh@example.com'`, string(bookingOf(fresh))))
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM free_texts WHERE booking = $1`, string(bookingOf(fresh))))
}

// The statements that commit deliveries keep the generic plan PostgreSQL makes of a prepared statement
// after five runs, alone and in groups, with bodies, contacts and texts: a statement whose custom plans
// look cheaper than its generic one is planned again on every run, which for these took as long as
// running them (issue #33: an EXISTS per contact row, costed for the ten rows a generic plan assumes
// of an array it cannot see, did that). pg_prepared_statements counts both kinds per connection.
func TestCommitStatementsKeepTheirGenericPlans(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(pgtest.NewDatabaseURL(t))
	require.NoError(t, err)
	cfg.MaxConns = 1 // one connection: its prepared statements are the ones asked about below
	pool, err := pgxpool.NewWithConfig(testCtx(t), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := postgres.NewStore(pool).WithBodySealer(&fakeSealer{})
	t.Cleanup(func() { settle(t, s) })
	ctx := testCtx(t)
	const runs = 8
	delivery := func(i int) ledger.Commit {
		st := streamName(t)
		c := withPersonal(commitOf("d-"+st, appendOf(st, eventlog.NoStream(), event(t, "booking.scheduled.v1"))),
			bookingOf(st), fmt.Sprintf("guest%d@example.com", i))
		c.Receipt.Body = []byte(fmt.Sprintf(`{"plan":%q}`, st))
		return c
	}
	for i := range runs {
		_, err := s.Commit(ctx, delivery(i))
		require.NoError(t, err)
		_, errs := commitHeldGroup(t, s, []ledger.Commit{delivery(2 * i), delivery(2*i + 1)})
		require.NoError(t, errors.Join(errs...))
	}
	assert.Equal(t, 3*runs, count(t, pool, `SELECT count(*) FROM contacts`))
	assert.Equal(t, 3*runs, count(t, pool, `SELECT count(*) FROM receipt_bodies WHERE key_id IS NOT NULL`))
	rows, err := pool.Query(ctx, `SELECT left(statement, 60), generic_plans, custom_plans FROM pg_prepared_statements
WHERE statement LIKE 'WITH %' AND statement LIKE '%INSERT INTO receipts%'`)
	require.NoError(t, err)
	seen := 0
	for rows.Next() {
		var (
			statement       string
			generic, custom int64
		)
		require.NoError(t, rows.Scan(&statement, &generic, &custom))
		seen++
		assert.Equal(t, int64(runs), generic+custom, "%s", statement)
		assert.LessOrEqual(t, custom, int64(5), "planned again on every run: %s", statement)
		assert.True(t, strings.HasPrefix(statement, "WITH a AS") || strings.HasPrefix(statement, "WITH d AS"),
			"a lone delivery through bl_append, a group through the set-based append: %s", statement)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, 2, seen, "the statements of a lone delivery and of a group")
}

// Copies of one delivery in one group store its body once, referenced by both receipts: the group's
// statement writes one row per digest (ON CONFLICT DO UPDATE may not touch a row twice in one
// statement).
func TestGroupCommitOfCopiesStoresTheirBodyOnce(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	s = s.WithBodySealer(&fakeSealer{})
	st := streamName(t)
	c := withPersonal(commitOf("d-copied", appendOf(st, eventlog.NoStream(), event(t, "booking.scheduled.v1"))), bookingOf(st), "copy@example.com")
	c.Receipt.Body = []byte(`{"copied":true}`)
	results, errs := commitHeldGroup(t, s, []ledger.Commit{c, c})
	require.NoError(t, errors.Join(errs...))
	assert.Equal(t, []ledger.Outcome{ledger.OutcomeAccepted, ledger.OutcomeDuplicate}, []ledger.Outcome{results[0].Outcome, results[1].Outcome})
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM receipt_bodies`))
	assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM receipts r JOIN receipt_bodies b ON b.digest = r.body_digest`))
	assert.Equal(t, "copy@example.com", contactOf(t, pool, bookingOf(st)))
}

func TestCommitRefusesPersonalDataWithoutAppends(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	_, err := s.Commit(testCtx(t), withPersonal(commitOf("d-none"), "calendly-x", "x@example.com"))
	require.ErrorIs(t, err, postgres.ErrPersonalWithoutAppends)
	assert.Zero(t, count(t, pool, `SELECT count(*) FROM receipts`))
}

// Copies of one delivery with a contact, sent at once, meet in concurrent groups: some append, some
// re-append, some find every event stored and commit a receipt only. Every one is recorded (a lock
// taken out of order between two groups would make PostgreSQL abort one as a deadlock).
func TestConcurrentCopiesWithAContactAreAllRecorded(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	svc := ledger.NewService(s, eventcodec.JSON{})
	for round := range 5 {
		b := booking.ID(fmt.Sprintf("calendly-copies-%d-%s", round, newID(t)))
		ev := booking.Event{ID: newID(t), Booking: b, Provider: "calendly", ProviderRef: string(b), OccurredAt: time.Now().UTC(),
			Payload: booking.Scheduled{Capacity: 1, Slot: booking.Slot{Meeting: "m", Resources: []string{"host"},
				Start: time.Date(2031, 1, 1, 9, 0, 0, 0, time.UTC), End: time.Date(2031, 1, 1, 10, 0, 0, 0, time.UTC)}}}
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := svc.Record(testCtx(t), ledger.Delivery{
					Receipt:  ledger.Receipt{Provider: "calendly", ReceivedAt: time.Now().UTC(), DeliveryID: "copy", Body: []byte(`{"copy":` + fmt.Sprint(i) + `}`)},
					Events:   []booking.Event{ev},
					Contacts: []ledger.Contact{{Booking: b, Email: "ada@example.com", Name: "Ada"}},
				})
				assert.NoError(t, err, "round %d copy %d", round, i)
			}()
		}
		wg.Wait()
		assert.Equal(t, 20, count(t, pool, `SELECT count(*) FROM receipts WHERE bookings @> ARRAY[$1::text]`, string(b)))
		assert.Equal(t, "ada@example.com", contactOf(t, pool, b))
	}
}

// Of a delivery's contacts for one booking the last is saved, and a redelivery that changes only the
// name updates it.
func TestCommitSavesTheNewestContact(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	st := streamName(t)
	b := bookingOf(st)
	c := commitOf("d-1", appendOf(st, eventlog.NoStream(), event(t, "booking.scheduled.v1")))
	c.Personal.Contacts = []ledger.Contact{{Booking: b, Email: "old@example.com", Name: "Old"}, {Booking: b, Email: "new@example.com", Name: "New"}}
	_, err := s.Commit(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, "new@example.com", contactOf(t, pool, b))

	c = commitOf("d-2", appendOf(st, eventlog.Exact(1), event(t, "booking.canceled.v1")))
	c.Personal.Contacts = []ledger.Contact{{Booking: b, Email: "new@example.com", Name: "Renamed"}}
	_, err = s.Commit(ctx, c)
	require.NoError(t, err)
	var name string
	require.NoError(t, pool.QueryRow(ctx, `SELECT name FROM contacts WHERE booking = $1`, string(b)).Scan(&name))
	assert.Equal(t, "Renamed", name)
}

// A contact's time zone (migration 0630) is saved with it, for the booking and for a seat, alone and
// in a group commit; a later delivery without a zone keeps the one known, one with another zone
// replaces it.
func TestCommitSavesTheContactsTimeZone(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := testCtx(t)
	zoneOf := func(table string, b booking.ID) string {
		var z string
		require.NoError(t, pool.QueryRow(ctx, `SELECT time_zone FROM `+table+` WHERE booking = $1`, string(b)).Scan(&z))
		return z
	}
	st := streamName(t)
	b := bookingOf(st)
	c := commitOf("d-1", appendOf(st, eventlog.NoStream(), event(t, "booking.scheduled.v1")))
	c.Personal.Contacts = []ledger.Contact{{Booking: b, Email: "ada@example.com", Name: "Ada", TimeZone: "Asia/Tokyo"},
		{Booking: b, Seat: "seat-1", Email: "bob@example.com", TimeZone: "Europe/Berlin"}}
	_, err := s.Commit(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, "Asia/Tokyo", zoneOf("contacts", b))
	assert.Equal(t, "Europe/Berlin", zoneOf("seat_contacts", b))

	c = commitOf("d-2", appendOf(st, eventlog.Exact(1), event(t, "booking.canceled.v1")))
	c.Personal.Contacts = []ledger.Contact{{Booking: b, Email: "ada@example.com", Name: "Ada"}, {Booking: b, Seat: "seat-1", Email: "bob@example.com"}}
	_, err = s.Commit(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, "Asia/Tokyo", zoneOf("contacts", b), "a delivery without a zone keeps the known one")
	assert.Equal(t, "Europe/Berlin", zoneOf("seat_contacts", b))

	c = commitOf("d-3", appendOf(st, eventlog.Exact(2), event(t, "booking.canceled.v1")))
	c.Personal.Contacts = []ledger.Contact{{Booking: b, Email: "ada@example.com", Name: "Ada", TimeZone: "America/New_York"}}
	_, err = s.Commit(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, "America/New_York", zoneOf("contacts", b))

	// Concurrent commits meet in group commits (commitGroupSQL): each keeps its own zone.
	zones := []string{"Asia/Tokyo", "Europe/Paris", "Australia/Sydney", "America/Chicago", "Africa/Cairo", "Asia/Kolkata", "UTC", "Pacific/Auckland"}
	var wg sync.WaitGroup
	streams := make([]string, len(zones))
	for i, z := range zones {
		streams[i] = streamName(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := commitOf(fmt.Sprintf("g-%d", i), appendOf(streams[i], eventlog.NoStream(), event(t, "booking.scheduled.v1")))
			c.Personal.Contacts = []ledger.Contact{{Booking: bookingOf(streams[i]), Email: "ada@example.com", TimeZone: z}}
			_, err := s.Commit(ctx, c)
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	for i, z := range zones {
		assert.Equal(t, z, zoneOf("contacts", bookingOf(streams[i])))
	}
}
