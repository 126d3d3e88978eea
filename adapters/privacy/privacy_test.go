package privacy_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/jobs"
	"bookingledger/adapters/jobs/jobstest"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/pgtest/plantest"
	"bookingledger/adapters/privacy"
	"bookingledger/adapters/providers"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
)

const (
	keyA = "a:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	keyB = "b:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="
)

// TestMain drops the package's spare databases once its tests have run.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := spares.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = cmp.Or(code, 1)
	}
	os.Exit(code)
}

// spares are the package's test databases (see pgtest.Spares), River's tables in them for the
// retention job: a test that passed gives its database back emptied, with its pool's warm
// connections, to the next.
var spares = pgtest.Spares{Extra: jobstest.Template}

type env struct {
	pool   *pgxpool.Pool
	bodies *privacy.Bodies
	store  *postgres.Store
	svc    *ledger.Service
}

// newEnv is a process with masterKey; with "" it is a release from before bodies were sealed (plain
// bodies, no subject).
func newEnv(t *testing.T, pool *pgxpool.Pool, masterKey string) *env {
	t.Helper()
	e := &env{pool: pool, store: postgres.NewStore(pool)}
	if masterKey != "" {
		ring, err := privacy.ParseKeyring(masterKey)
		require.NoError(t, err)
		e.bodies = privacy.NewBodies(pool, ring)
		e.store = e.store.WithBodySealer(e.bodies)
	}
	e.svc = ledger.NewService(e.store, eventcodec.JSON{})
	return e
}

var t0 = time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)

// deliver records a create (and the body naming the person, and the contacts) of booking b.
func (e *env) deliver(t *testing.T, b booking.ID, deliveryID string, body []byte, contacts ...ledger.Contact) ledger.Result {
	t.Helper()
	ev := booking.Event{ID: eventlog.EventID(providers.EventID("calendly", string(b)+" created")), Booking: b, Provider: "calendly",
		ProviderRef: string(b) + " created", OccurredAt: t0.Add(-time.Hour), Payload: booking.Scheduled{
			Slot: booking.Slot{Meeting: "m-" + string(b), Resources: []string{"host"}, Start: t0, End: t0.Add(30 * time.Minute)}, Capacity: 1}}
	res, err := e.svc.Record(context.Background(), ledger.Delivery{
		Receipt:  ledger.Receipt{Provider: "calendly", ReceivedAt: t0, DeliveryID: deliveryID, Secret: "0:abc", Body: body},
		Events:   []booking.Event{ev},
		Contacts: contacts})
	require.NoError(t, err)
	return res
}

func (e *env) cancel(t *testing.T, b booking.ID, reason string) {
	t.Helper()
	ev := booking.Event{ID: eventlog.EventID(providers.EventID("calendly", string(b)+" canceled")), Booking: b, Provider: "calendly",
		ProviderRef: string(b) + " canceled", OccurredAt: t0.Add(-time.Minute), Payload: booking.Canceled{Reason: reason, CanceledBy: "invitee"}}
	_, err := e.svc.Record(context.Background(), ledger.Delivery{
		Receipt: ledger.Receipt{Provider: "calendly", ReceivedAt: t0, DeliveryID: string(b) + "-cancel", Body: []byte(`{"reason":"` + reason + `"}`)},
		Events:  []booking.Event{ev}})
	require.NoError(t, err)
}

func (e *env) bodiesOf(t *testing.T, b booking.ID) []postgres.StoredReceipt {
	t.Helper()
	rs, err := e.store.ReceiptsForBooking(context.Background(), string(b))
	require.NoError(t, err)
	return rs
}

// dump is every byte of every row of every table of the database, as text.
func dump(t *testing.T, pool *pgxpool.Pool) []byte {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`)
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		tables = append(tables, n)
	}
	require.NoError(t, rows.Err())
	var buf bytes.Buffer
	for _, tb := range tables {
		var s string
		require.NoError(t, pool.QueryRow(ctx, fmt.Sprintf(`SELECT coalesce(string_agg(t::text, E'\n'), '') FROM %q t`, tb)).Scan(&s))
		buf.WriteString(s)
	}
	return buf.Bytes()
}

func hexOf(s string) []byte { return []byte(fmt.Sprintf("%x", s)) }

func TestBodiesAreSealedAndOpenForReaders(t *testing.T) {
	t.Parallel()
	pool := spares.Database(t)
	e := newEnv(t, pool, keyA)
	body := []byte(`{"email":"ada.sealed@example.com","name":"Ada Sealed"}`)
	assert.Equal(t, ledger.OutcomeAccepted, e.deliver(t, "calendly-s1", "d1", body).Outcome)
	assert.Equal(t, ledger.OutcomeDuplicate, e.deliver(t, "calendly-s1", "d1", body).Outcome)

	rs := e.bodiesOf(t, "calendly-s1")
	require.Len(t, rs, 2)
	for _, r := range rs {
		assert.Equal(t, body, r.Receipt.Body, "an authorised reader gets the body as received")
	}
	d := dump(t, pool)
	assert.NotContains(t, string(d), "ada.sealed")
	assert.False(t, bytes.Contains(d, hexOf("ada.sealed")), "no bytea column holds it in the clear")
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM receipt_bodies WHERE key_id IS NOT NULL AND subject = 'calendly-s1'`).Scan(&n))
	assert.Equal(t, 1, n, "one body per digest, shared by the duplicate, sealed for its booking")

	// Another process (its own data key for the same subject) reads it too.
	other := newEnv(t, pool, keyA)
	assert.Equal(t, body, other.bodiesOf(t, "calendly-s1")[0].Receipt.Body)
}

func TestWrongOrMissingMasterKeyFailsClosed(t *testing.T) {
	t.Parallel()
	_, err := privacy.ParseKeyring("")
	require.ErrorIs(t, err, privacy.ErrNoMasterKey)
	// Ids a text column refuses (NUL, not UTF-8) or that are not plain (control characters, spaces):
	// the id is stored with every data key, so a bad one failed every seal after a clean start.
	b64 := keyA[len("a:"):]
	for _, bad := range []string{"nokey", "a:!!", "a:AAEC", keyA + "," + keyA, ":" + b64, strings.Repeat("k", 65) + ":" + b64,
		"k\x00:" + b64, "k\xff:" + b64, "k\x1b1:" + b64, "k 1:" + b64, "k\u00e9:" + b64} {
		_, err := privacy.ParseKeyring(bad)
		require.ErrorIs(t, err, privacy.ErrMasterKeyFormat, bad)
	}

	pool := spares.Database(t)
	e := newEnv(t, pool, keyA)
	e.deliver(t, "calendly-k1", "d1", []byte(`{"name":"Key Holder"}`))
	require.NoError(t, e.bodies.Check(context.Background()))

	wrong := newEnv(t, pool, "a:"+keyB[2:]) // same id, other bytes
	err = wrong.bodies.Check(context.Background())
	require.ErrorIs(t, err, privacy.ErrWrongMasterKey)
	_, err = wrong.store.ReceiptsForBooking(context.Background(), "calendly-k1")
	require.ErrorIs(t, err, privacy.ErrWrongMasterKey, "a reader with the wrong key gets an error, never garbage")

	lost := newEnv(t, pool, keyB)
	require.ErrorIs(t, lost.bodies.Check(context.Background()), privacy.ErrUnknownMasterKey)
}

// TestMasterKeyCheckReadsAKeyPerID holds the startup check of the master keys (run by serve and by
// every command that opens the ledger with one) to the stored data keys of every master key id, read
// one key per id through subject_keys_kek_idx: on a ledger of 20,000 keys its plan reads no more.
func TestMasterKeyCheckReadsAKeyPerID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabaseURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	rule := plantest.Rule{Watched: []string{"subject_keys"}}
	trace := &plantest.Trace{Naming: rule.Watched}
	cfg.ConnConfig.Tracer = trace
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	// Keys of master key "a" (one booking's, copied: a copy opens with its subject), then one of "b".
	newEnv(t, pool, keyA).deliver(t, "calendly-a", "a", []byte(`{"name":"A"}`))
	_, err = pool.Exec(ctx, `INSERT INTO subject_keys (id, subject, kek_id, wrapped)
SELECT gen_random_uuid(), subject, kek_id, wrapped FROM subject_keys, generate_series(1, 20000)`)
	require.NoError(t, err)
	newEnv(t, pool, keyB+","+keyA).deliver(t, "calendly-b", "b", []byte(`{"name":"B"}`))
	_, err = pool.Exec(ctx, `ANALYZE subject_keys`)
	require.NoError(t, err)

	check := func(masterKey string) error {
		ring, err := privacy.ParseKeyring(masterKey)
		require.NoError(t, err)
		return privacy.NewBodies(pool, ring).Check(ctx)
	}
	trace.On.Store(true)
	require.NoError(t, check(keyB+","+keyA))
	trace.On.Store(false)
	require.ErrorIs(t, check(keyA), privacy.ErrUnknownMasterKey, "the key of the last id is read too")
	require.ErrorIs(t, check(keyB), privacy.ErrUnknownMasterKey, "the key of the first id is read too")
	require.ErrorIs(t, check(keyA+",b:"+keyA[2:]), privacy.ErrWrongMasterKey, "b's key is opened, not only named")

	require.Contains(t, trace.Text(), "subject_keys", "the scenario sends the statement it means to explain")
	conn := plantest.Connect(t, url)
	for _, s := range trace.Statements() {
		rule.Check(t, conn, "a ledger of 20,001 data keys", s, plantest.Custom)
	}
}

func TestRewrapThenRemoveTheOldKey(t *testing.T) {
	t.Parallel()
	pool := spares.Database(t)
	old := newEnv(t, pool, keyA)
	want := map[booking.ID][]byte{}
	for i := range 5 {
		b := booking.ID(fmt.Sprintf("calendly-r%d", i))
		want[b] = []byte(fmt.Sprintf(`{"name":"Person %d"}`, i))
		old.deliver(t, b, string(b), want[b])
	}
	// More keys than a batch rewraps (copies of one subject's key, which opens with its subject).
	_, err := pool.Exec(context.Background(), `INSERT INTO subject_keys (id, subject, kek_id, wrapped)
SELECT gen_random_uuid(), subject, kek_id, wrapped FROM subject_keys, generate_series(1, 1200) LIMIT 1200`)
	require.NoError(t, err)
	ring, err := privacy.ParseKeyring(keyB + "," + keyA)
	require.NoError(t, err)
	newEnv(t, pool, keyB+","+keyA).deliver(t, "calendly-r5", "r5", []byte(`{"name":"Person 5"}`)) // restarted with the new key first
	want["calendly-r5"] = []byte(`{"name":"Person 5"}`)
	counts, err := privacy.KeyCounts(context.Background(), pool)
	require.NoError(t, err)
	assert.Equal(t, []privacy.KeyCount{{KEK: "a", Keys: 1205}, {KEK: "b", Keys: 1}}, counts, "by master key id")
	n, err := privacy.Rewrap(context.Background(), pool, ring)
	require.NoError(t, err)
	assert.EqualValues(t, 1205, n)
	n, err = privacy.Rewrap(context.Background(), pool, ring)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing left to rewrap")
	// A process started before the rotation still seals with the key it made then (wrapped by the old
	// master key): storing it again leaves the rewrapped row as it is.
	want["calendly-r0"] = []byte(`{"name":"Person 0","again":true}`)
	old.deliver(t, "calendly-r0", "r0-again", want["calendly-r0"])

	onlyNew := newEnv(t, pool, keyB)
	require.NoError(t, onlyNew.bodies.Check(context.Background()))
	for b, body := range want {
		rs := onlyNew.bodiesOf(t, b)
		assert.Equal(t, body, rs[len(rs)-1].Receipt.Body)
	}
	counts, err = privacy.KeyCounts(context.Background(), pool)
	require.NoError(t, err)
	assert.Equal(t, []privacy.KeyCount{{KEK: "b", Keys: 1206}}, counts)
}

func TestEraseBookingShredsItsDataOnly(t *testing.T) {
	t.Parallel()
	pool := spares.Database(t)
	ctx := context.Background()
	e := newEnv(t, pool, keyA)
	e.deliver(t, "calendly-gone", "g1", []byte(`{"email":"gone@example.com","phone":"+44 7700 900123"}`),
		ledger.Contact{Booking: "calendly-gone", Email: "gone@example.com", Name: "Gone Person"})
	e.cancel(t, "calendly-gone", "gone-reason")
	e.deliver(t, "calendly-kept", "k1", []byte(`{"email":"kept@example.com"}`),
		ledger.Contact{Booking: "calendly-kept", Email: "kept@example.com", Name: "Kept Person"})
	e.cancel(t, "calendly-kept", "kept-reason")

	eraser := privacy.NewEraser(pool, e.bodies, owners(pool))
	dry, err := eraser.Erase(ctx, privacy.Request{Email: "GONE@example.com", By: "test", DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"calendly-gone"}, dry.Bookings)
	assert.EqualValues(t, 1, dry.Counts.Contacts)
	assert.EqualValues(t, 2, dry.Counts.Bodies)
	assert.EqualValues(t, 1, dry.Counts.FreeTexts)
	assert.Positive(t, dry.Counts.DataKeys)
	assert.Equal(t, []byte(`{"email":"gone@example.com","phone":"+44 7700 900123"}`), e.bodiesOf(t, "calendly-gone")[0].Receipt.Body, "a dry run keeps everything")

	er, err := eraser.Erase(ctx, privacy.Request{Email: "gone@example.com", By: "test"})
	require.NoError(t, err)
	assert.Positive(t, er.ID)
	assert.Equal(t, dry.Counts, er.Counts)

	for _, r := range e.bodiesOf(t, "calendly-gone") {
		assert.Nil(t, r.Receipt.Body)
		assert.True(t, r.Body.Erased)
		assert.Equal(t, er.ErasedAt, r.Body.ErasedAt)
	}
	d := dump(t, pool)
	for _, gone := range []string{"gone@example.com", "Gone Person", "+44 7700 900123", "gone-reason"} {
		assert.NotContains(t, string(d), gone)
		assert.False(t, bytes.Contains(d, hexOf(gone)), gone)
	}
	assert.Contains(t, string(d), "kept@example.com", "another person's contact stays")
	assert.Contains(t, string(d), "kept-reason")
	assert.Equal(t, []byte(`{"email":"kept@example.com"}`), e.bodiesOf(t, "calendly-kept")[0].Receipt.Body)

	// Again: by address nothing is found any more, by booking nothing is left; no new fact.
	_, err = eraser.Erase(ctx, privacy.Request{Email: "gone@example.com", By: "test"})
	require.ErrorIs(t, err, privacy.ErrNothingToErase)
	// What a text column refuses is a bad request, not a failing statement (a 500 from the API).
	for _, bad := range []privacy.Request{{Email: "gone\x00@example.com", By: "test"}, {Email: "gone\xff@example.com", By: "test"},
		{Booking: "calendly-gone", By: "te\x00st"}, {Booking: "calendly-go\x00ne", By: "test"}} {
		_, err = eraser.Erase(ctx, bad)
		require.ErrorIs(t, err, privacy.ErrInvalidErasure, "%+v", bad)
	}
	again, err := eraser.Erase(ctx, privacy.Request{Booking: "calendly-gone", By: "test"})
	require.NoError(t, err)
	assert.Zero(t, again.ID)
	assert.Equal(t, privacy.Counts{}, again.Counts)
	all, err := eraser.Erasures(ctx, 10)
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Equal(t, []string{"calendly-gone"}, all[0].Bookings)

	// A redelivery after the erasure is recorded, without its body or contact.
	assert.Equal(t, ledger.OutcomeDuplicate, e.deliver(t, "calendly-gone", "g2", []byte(`{"email":"gone@example.com","retry":1}`),
		ledger.Contact{Booking: "calendly-gone", Email: "gone@example.com"}).Outcome)
	for _, r := range e.bodiesOf(t, "calendly-gone") {
		assert.Nil(t, r.Receipt.Body, "receipt %d (%s) keeps no readable body", r.ID, r.Receipt.DeliveryID)
	}
	d = dump(t, pool)
	assert.NotContains(t, string(d), "gone@example.com")
	assert.False(t, bytes.Contains(d, hexOf("gone@example.com")))
}

// Erasure and ingest of the same booking, concurrently, many times: whatever the interleaving, once
// both are done nothing of the person is left, and every delivery was recorded.
func TestEraseConcurrentWithRedelivery(t *testing.T) {
	t.Parallel()
	pool := spares.Database(t)
	ctx := context.Background()
	e := newEnv(t, pool, keyA)
	eraser := privacy.NewEraser(pool, e.bodies, owners(pool))
	for i := range 10 {
		b := booking.ID(fmt.Sprintf("calendly-race%d", i))
		secret := fmt.Sprintf("race-secret-%d", i)
		e.deliver(t, b, "first", []byte(`{"who":"`+secret+`"}`))
		var wg sync.WaitGroup
		for j := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := e.svc.Record(ctx, ledger.Delivery{
					Receipt:  ledger.Receipt{Provider: "calendly", ReceivedAt: t0, DeliveryID: fmt.Sprintf("again-%d", j), Body: []byte(`{"who":"` + secret + `","copy":` + fmt.Sprint(j) + `}`)},
					Contacts: []ledger.Contact{{Booking: b, Email: secret + "@example.com", Name: secret}},
					Events: []booking.Event{{ID: eventlog.EventID(providers.EventID("calendly", string(b)+" canceled")), Booking: b, Provider: "calendly",
						ProviderRef: string(b) + " canceled", OccurredAt: t0, Payload: booking.Canceled{Reason: secret, CanceledBy: "invitee"}}}})
				assert.NoError(t, err)
				assert.Contains(t, []ledger.Outcome{ledger.OutcomeAccepted, ledger.OutcomeDuplicate}, res.Outcome)
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := eraser.Erase(ctx, privacy.Request{Booking: b, By: "test"})
			assert.NoError(t, err)
		}()
		wg.Wait()
		d := dump(t, pool)
		assert.NotContains(t, string(d), secret, "round %d", i)
		assert.False(t, bytes.Contains(d, hexOf(secret)), "round %d", i)
		rs := e.bodiesOf(t, b)
		assert.Len(t, rs, 5, "every delivery has its receipt")
		for _, r := range rs {
			assert.Nil(t, r.Receipt.Body, "round %d: receipt %d's body is readable after the erasure", i, r.ID)
		}
	}
}

// BOOKINGLEDGER_RECEIPT_BODY_RETENTION: the periodic River job shreds bodies stored longer ago than
// the retention, and only those: an old key that still seals a younger body stays, and an inline body
// of a receipt stored before migration 0031 goes when the receipt is old.
func TestRetentionJobShredsOldBodiesOnly(t *testing.T) {
	t.Parallel()
	pool := spares.Database(t)
	ctx := context.Background()
	e := newEnv(t, pool, keyA)
	e.deliver(t, "calendly-old", "o1", []byte(`{"name":"Old Timer"}`))
	e.deliver(t, "calendly-new", "n1", []byte(`{"name":"New Comer"}`))
	e.deliver(t, "calendly-both", "b1", []byte(`{"name":"Both Early"}`))
	e.deliver(t, "calendly-both", "b2", []byte(`{"name":"Both Later"}`))
	e.deliver(t, "calendly-inline", "i1", nil)
	for _, q := range []string{
		`UPDATE receipt_bodies SET stored_at = now() - interval '500 days' WHERE subject = 'calendly-old'`,
		`UPDATE subject_keys SET created_at = now() - interval '500 days' WHERE subject IN ('calendly-old', 'calendly-both')`,
		`UPDATE receipt_bodies SET stored_at = now() - interval '500 days' WHERE digest = (SELECT body_digest FROM receipts WHERE delivery_id = 'b1')`,
		`UPDATE receipts SET body = '{"name":"Inline Ingrid"}', received_at = now() - interval '500 days' WHERE delivery_id = 'i1'`,
		// a young key of the old subject that seals nothing (another process's)
		`INSERT INTO subject_keys (id, subject, kek_id, wrapped) SELECT gen_random_uuid(), subject, kek_id, wrapped FROM subject_keys WHERE subject = 'calendly-old'`,
	} {
		_, err := pool.Exec(ctx, q)
		require.NoError(t, err)
	}

	q, err := jobs.New(jobs.Config{Pool: pool, Ledger: e.svc, PollInterval: 50 * time.Millisecond, Kinds: []jobs.Kind{{
		Queue: privacy.RetentionQueue, Workers: 1,
		Register: func(w *river.Workers) error {
			return river.AddWorkerSafely(w, &privacy.RetentionWorker{Pool: pool, Receipts: postgres.NewStore(pool), Retention: 400 * 24 * time.Hour})
		},
		Periodic: []*river.PeriodicJob{privacy.RetentionJob(time.Hour)}}}})
	require.NoError(t, err)
	require.NoError(t, q.Start(ctx))
	t.Cleanup(func() { _ = q.Stop(context.Background()) })

	require.Eventually(t, func() bool {
		rs, err := e.store.ReceiptsForBooking(ctx, "calendly-old")
		return err == nil && len(rs) == 1 && rs[0].Body.Erased
	}, 30*time.Second, 100*time.Millisecond, "the job runs at start and shreds the old body")
	assert.Equal(t, []byte(`{"name":"New Comer"}`), e.bodiesOf(t, "calendly-new")[0].Receipt.Body, "a younger body stays")
	var bodies []string
	for _, r := range e.bodiesOf(t, "calendly-both") {
		bodies = append(bodies, fmt.Sprintf("%s erased=%t", r.Receipt.Body, r.Body.Erased))
	}
	assert.ElementsMatch(t, []string{` erased=true`, `{"name":"Both Later"} erased=false`}, bodies,
		"the old key still opens the younger body it seals")
	var keys int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM subject_keys WHERE subject = 'calendly-old'`).Scan(&keys))
	assert.Zero(t, keys, "the data keys that sealed nothing else are gone, the young one too")
	dumped := string(dump(t, pool))
	assert.NotContains(t, dumped, "Old Timer")
	assert.NotContains(t, dumped, "Both Early")
	assert.NotContains(t, dumped, "Inline Ingrid")
	list, err := privacy.NewEraser(pool, nil, owners(pool)).Erasures(ctx, 10)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "retention", list[0].Kind)
	assert.EqualValues(t, 2, list[0].Counts.Bodies)
	assert.EqualValues(t, 1, list[0].Counts.InlineBodies)
	assert.EqualValues(t, 2, list[0].Counts.DataKeys)
}

// Retention and an ingest of the same subject: the ingest seals a new body with the subject's old
// data key while retention shreds the subject's old body. The key must outlive the commit of both,
// whichever order they commit in (retention waits for the ingest's lock on the subject).
func TestRetentionKeepsAKeyAnIngestInFlightSealsWith(t *testing.T) {
	t.Parallel()
	pool := spares.Database(t)
	ctx := context.Background()
	e := newEnv(t, pool, keyA)
	e.deliver(t, "calendly-race", "r1", []byte(`{"name":"Early Bird"}`))
	for _, q := range []string{
		`UPDATE receipt_bodies SET stored_at = now() - interval '500 days' WHERE subject = 'calendly-race'`,
		`UPDATE subject_keys SET created_at = now() - interval '500 days' WHERE subject = 'calendly-race'`,
	} {
		_, err := pool.Exec(ctx, q)
		require.NoError(t, err)
	}
	ingest, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = ingest.Rollback(ctx) }()
	digest := sha256.Sum256([]byte("a later body"))
	// As the ingest's commit does: the subject's erasure lock shared, then the body under its key.
	_, err = ingest.Exec(ctx, `SELECT pg_advisory_xact_lock_shared(bl_erasure_lock_key('calendly-race'))`)
	require.NoError(t, err)
	_, err = ingest.Exec(ctx, `INSERT INTO receipt_bodies (digest, body, subject, key_id)
SELECT $2, $1, k.subject, k.id FROM subject_keys k WHERE k.subject = 'calendly-race'`, []byte("sealed later"), digest[:])
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := privacy.ShredOlderThan(ctx, pool, postgres.NewStore(pool), time.Now().Add(-400*24*time.Hour))
		done <- err
	}()
	ended := false
	select {
	case err := <-done: // it did not wait: the key must be there all the same
		require.NoError(t, err)
		ended = true
	case <-time.After(500 * time.Millisecond):
	}
	require.NoError(t, ingest.Commit(ctx))
	if !ended {
		require.NoError(t, <-done)
	}
	var keys, sealed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), (SELECT count(*) FROM receipt_bodies b WHERE b.key_id = ANY(array_agg(k.id)))
FROM subject_keys k WHERE k.subject = 'calendly-race'`).Scan(&keys, &sealed))
	assert.Equal(t, 1, keys, "the key the ingest sealed with")
	assert.Equal(t, 1, sealed, "the new body, sealed with it; the old one shredded")
}

// An erasure finds a person's rows through indexes: a full read of a large ledger's bodies would cost
// seconds per request, while ingest of the person's bookings waits for it. The one read that stays
// whole is the lookup of an address in contacts (no index on lower(email): it would cost every
// ingest an insert), so contacts is not watched.
func TestEraseReadsStayIndexed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabaseURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	rule := plantest.Rule{Watched: []string{"receipt_bodies", "receipts", "subject_keys", "free_texts", "process_steps", "calendar_bookings"}}
	trace := &plantest.Trace{Naming: rule.Watched}
	cfg.ConnConfig.Tracer = trace
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := newEnv(t, pool, keyA)
	e.deliver(t, "calendly-gone", "g1", []byte(`{"email":"gone@example.com"}`),
		ledger.Contact{Booking: "calendly-gone", Email: "gone@example.com", Name: "Gone Person"})
	e.cancel(t, "calendly-gone", "gone-reason")
	// 20,000 other people's bookings, made in bulk.
	for _, q := range []string{
		`INSERT INTO subject_keys (id, subject, kek_id, wrapped) SELECT gen_random_uuid(), 'calendly-p' || g, 'a', '\x00' FROM generate_series(1, 20000) g`,
		`INSERT INTO receipt_bodies (digest, body, subject, key_id) SELECT sha256(k.subject::bytea), '\x0102030405060708', k.subject, k.id
FROM subject_keys k WHERE k.subject LIKE 'calendly-p%'`,
		`INSERT INTO receipts (provider, received_at, delivery_id, outcome, bookings, streams, event_ids, event_types, body_digest)
SELECT 'calendly', now(), 'p' || g, 'accepted', ARRAY['calendly-p' || g], ARRAY['booking-calendly-p' || g], ARRAY[gen_random_uuid()],
    ARRAY['created'], sha256(('calendly-p' || g)::bytea) FROM generate_series(1, 20000) g`,
		`INSERT INTO free_texts (event, field, booking, text) SELECT gen_random_uuid(), 'cancel_reason', 'calendly-p' || g, 'a reason'
FROM generate_series(1, 20000) g`,
		`INSERT INTO calendar_bookings (booking, provider, status, cancel_reason) SELECT 'calendly-p' || g, 'calendly', 'canceled', 'a reason'
FROM generate_series(1, 20000) g`,
		`INSERT INTO process_steps (key, kind, thread, booking, answers, state, last_error)
SELECT gen_random_uuid(), 'invitee_email.confirmation', 'calendly-p' || g, 'calendly-p' || g, 'x', 'pending', 'an error'
FROM generate_series(1, 20000) g`,
		`ANALYZE`,
	} {
		_, err := pool.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	trace.On.Store(true)
	_, err = privacy.NewEraser(pool, e.bodies, owners(pool)).Erase(ctx, privacy.Request{Email: "gone@example.com", By: "test"})
	trace.On.Store(false)
	require.NoError(t, err)
	require.Contains(t, trace.Text(), "UPDATE receipt_bodies", "the scenario sends the statements it means to explain")
	conn := plantest.Connect(t, url)
	for _, s := range trace.Statements() {
		rule.Check(t, conn, "a ledger of 20,000 bookings", s, plantest.Custom)
	}
}
