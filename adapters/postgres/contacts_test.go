package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/pgtest/plantest"
	"bookingledger/domain/ledger"
)

// contactRead is one QueueContact's outcome.
type contactRead struct {
	c     ledger.Contact
	found bool
	err   error
}

// queueContacts sends the reads of reads' bookings and seats (booking, seat pairs) in one batch, as a
// claim sends them after its COMMIT, and returns their outcomes and the batch's own error.
func queueContacts(t *testing.T, pool *pgxpool.Pool, pairs ...[2]string) ([]contactRead, error) {
	t.Helper()
	contacts := postgres.NewContacts(pool)
	out := make([]contactRead, len(pairs))
	b := &pgx.Batch{}
	for i, p := range pairs {
		contacts.QueueContact(b, p[0], p[1], &out[i].c, &out[i].found, &out[i].err)
	}
	return out, pool.SendBatch(context.Background(), b).Close()
}

// A queued contact read answers the booking's contact, a seat's attendee (never the booking's
// contact for a seat) or nothing known, each in its own outcome, within one batch.
func TestQueueContactReadsTheBookingsOrTheSeatsContact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDatabase(t)
	_, err := pool.Exec(ctx, `INSERT INTO contacts (booking, email, name, time_zone) VALUES ('calcom-q1', 'ada@example.test', 'Ada', 'Europe/Paris')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO seat_contacts (booking, seat, email, name) VALUES ('calcom-q1', 'seat-2', 'grace@example.test', 'Grace')`)
	require.NoError(t, err)

	got, err := queueContacts(t, pool, [2]string{"calcom-q1", ""}, [2]string{"calcom-q1", "seat-2"}, [2]string{"calcom-q1", "seat-9"}, [2]string{"calcom-none", ""})
	require.NoError(t, err)
	for _, r := range got {
		require.NoError(t, r.err)
	}
	assert.Equal(t, contactRead{c: ledger.Contact{Booking: "calcom-q1", Email: "ada@example.test", Name: "Ada", TimeZone: "Europe/Paris"}, found: true}, got[0])
	assert.Equal(t, contactRead{c: ledger.Contact{Booking: "calcom-q1", Seat: "seat-2", Email: "grace@example.test", Name: "Grace"}, found: true}, got[1])
	assert.Equal(t, contactRead{}, got[2], "a seat without a contact of its own has none")
	assert.Equal(t, contactRead{}, got[3])
}

// A seated booking's attendees are read in one round trip whatever the number of seats: each seat's
// own contact, the booking's contact for "" (a seat known only by number), nothing for a seat without
// one.
func TestAttendeesReadsEverySeatInOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewDatabaseURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	var trips tripCounter
	cfg.ConnConfig.Tracer = &trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `INSERT INTO contacts (booking, email, name) VALUES ('calcom-s1', 'host-guest@example.test', 'First')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO seat_contacts (booking, seat, email, name, time_zone)
SELECT 'calcom-s1', 'seat-' || n, 'a' || n || '@example.test', 'Attendee ' || n, 'Asia/Tokyo' FROM generate_series(1, 20) n`)
	require.NoError(t, err)
	seats := []string{""}
	for n := 1; n <= 25; n++ {
		seats = append(seats, fmt.Sprintf("seat-%d", n))
	}

	trips.n.Store(0)
	got, err := postgres.NewContacts(pool).Attendees(ctx, "calcom-s1", seats)
	require.NoError(t, err)
	assert.EqualValues(t, 1, trips.n.Load(), "round trips for 26 seats")
	require.Len(t, got, 21, "the booking's contact and the 20 seats that have one")
	assert.Equal(t, ledger.Contact{Booking: "calcom-s1", Email: "host-guest@example.test", Name: "First"}, got[""])
	assert.Equal(t, ledger.Contact{Booking: "calcom-s1", Seat: "seat-7", Email: "a7@example.test", Name: "Attendee 7", TimeZone: "Asia/Tokyo"}, got["seat-7"])
	assert.NotContains(t, got, "seat-21")

	got, err = postgres.NewContacts(pool).Attendees(ctx, "calcom-s1", []string{"seat-3"})
	require.NoError(t, err)
	assert.Equal(t, []string{"seat-3"}, keys(got), "only the seats asked for; the booking's contact only for \"\"")
	got, err = postgres.NewContacts(pool).Attendees(ctx, "calcom-none", seats)
	require.NoError(t, err)
	assert.Empty(t, got)
}

func keys(m map[string]ledger.Contact) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// tripCounter is a pgx tracer counting round trips: each query and each batch is one.
type tripCounter struct{ n atomic.Int32 }

func (r *tripCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *tripCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *tripCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *tripCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *tripCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// A queued read that fails says so in its own outcome; what the batch sent before it (the claim and
// its COMMIT) stands, and the caller rolls back the transaction the read left failed.
func TestQueueContactKeepsItsErrorToItself(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDatabase(t)
	_, err := pool.Exec(ctx, `CREATE TABLE before_read (n int)`)
	require.NoError(t, err)
	// A read that fails as it runs (a failure at prepare time fails the whole batch before it is sent).
	_, err = pool.Exec(ctx, `INSERT INTO contacts (booking, email) VALUES ('calcom-away', 'away@example.test');
ALTER TABLE contacts RENAME TO contacts_away;
CREATE FUNCTION refuse_read() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$ BEGIN RAISE EXCEPTION 'read refused'; END $$;
CREATE VIEW contacts AS SELECT booking, email, name, time_zone FROM contacts_away WHERE refuse_read()`)
	require.NoError(t, err)

	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	contacts := postgres.NewContacts(pool)
	var r contactRead
	b := &pgx.Batch{}
	b.Queue(`BEGIN`) // as a claim's transaction, committed before the read
	b.Queue(`INSERT INTO before_read VALUES (1)`)
	b.Queue(`COMMIT`)
	contacts.QueueContact(b, "calcom-away", "", &r.c, &r.found, &r.err)
	require.Error(t, conn.SendBatch(ctx, b).Close(), "the batch says a statement failed")
	require.Error(t, r.err)
	assert.Contains(t, r.err.Error(), "read contact of calcom-away")
	assert.Contains(t, r.err.Error(), "read refused")
	assert.False(t, r.found)
	assert.Equal(t, byte('E'), conn.Conn().PgConn().TxStatus(), "the read's transaction is left failed for the caller")
	_, err = conn.Exec(ctx, `ROLLBACK`)
	require.NoError(t, err)
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM before_read`).Scan(&n))
	assert.Equal(t, 1, n, "what the batch sent before the read is committed")
}

// The queued reads plan under index-only settings with its own text, so that a connection that
// prepared it while contacts was empty or a page does not keep a sequential scan as the table grows:
// explained on a database whose tables were analyzed empty and on a filled one.
func TestQueueContactStaysIndexed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	trace := &plantest.Trace{Naming: []string{"contacts"}}
	url := pgtest.NewDatabaseURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = trace
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = pool.Exec(ctx, `INSERT INTO contacts (booking, email) SELECT 'calcom-f' || n, 'f' || n || '@example.test' FROM generate_series(1, 3000) n`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO seat_contacts (booking, seat, email) SELECT 'calcom-f' || n, 'seat-1', 'f' || n || '@example.test' FROM generate_series(1, 3000) n`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE contacts, seat_contacts`)
	require.NoError(t, err)

	trace.On.Store(true)
	got, err := queueContacts(t, pool, [2]string{"calcom-f7", ""}, [2]string{"calcom-f7", "seat-1"})
	require.NoError(t, err)
	attendees, err := postgres.NewContacts(pool).Attendees(ctx, "calcom-f8", []string{"", "seat-1", "seat-2"})
	require.NoError(t, err)
	trace.On.Store(false)
	require.True(t, got[0].found)
	require.True(t, got[1].found)
	require.Len(t, attendees, 2)
	settings := trace.Settings()
	require.Contains(t, settings, "enable_seqscan = off")
	require.Len(t, trace.Statements(), 3)

	empty := pgtest.NewDatabaseURL(t)
	emptied := plantest.Connect(t, empty)
	_, err = emptied.Exec(ctx, `ANALYZE contacts, seat_contacts`) // analyzed empty, as autovacuum may leave a new database
	require.NoError(t, err)
	rule := plantest.Rule{Watched: []string{"contacts"}}
	for _, db := range []struct{ name, url string }{{"empty", empty}, {"filled", url}} {
		conn := plantest.Connect(t, db.url, settings...)
		for _, s := range trace.Statements() {
			rule.Check(t, conn, fmt.Sprintf("%s database (settings %v)", db.name, settings), s, plantest.Custom, plantest.Kept)
		}
	}
}
