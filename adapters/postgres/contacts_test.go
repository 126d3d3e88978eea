package postgres_test

import (
	"context"
	"fmt"
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

// A queued contact read answers what Contact answers — the booking's contact, a seat's attendee,
// nothing known — each in its own outcome, within one batch.
func TestQueueContactReadsWhatContactReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.NewDatabase(t)
	_, err := pool.Exec(ctx, `INSERT INTO contacts (booking, email, name, time_zone) VALUES ('calcom-q1', 'ada@example.test', 'Ada', 'Europe/Paris')`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO seat_contacts (booking, seat, email, name) VALUES ('calcom-q1', 'seat-2', 'grace@example.test', 'Grace')`)
	require.NoError(t, err)

	got, err := queueContacts(t, pool, [2]string{"calcom-q1", ""}, [2]string{"calcom-q1", "seat-2"}, [2]string{"calcom-q1", "seat-9"}, [2]string{"calcom-none", ""})
	require.NoError(t, err)
	contacts := postgres.NewContacts(pool)
	for i, p := range [][2]string{{"calcom-q1", ""}, {"calcom-q1", "seat-2"}, {"calcom-q1", "seat-9"}, {"calcom-none", ""}} {
		want, found, err := contacts.Contact(ctx, p[0], p[1])
		require.NoError(t, err)
		require.NoError(t, got[i].err, p)
		assert.Equal(t, found, got[i].found, p)
		assert.Equal(t, want, got[i].c, p)
	}
	assert.Equal(t, "Europe/Paris", got[0].c.TimeZone)
	assert.Equal(t, "grace@example.test", got[1].c.Email)
	assert.False(t, got[2].found)
	assert.False(t, got[3].found)
}

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

// The queued read plans under index-only settings with its own text, so that a connection that
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
	trace.On.Store(false)
	require.True(t, got[0].found)
	require.True(t, got[1].found)
	settings := trace.Settings()
	require.Contains(t, settings, "enable_seqscan = off")
	require.Len(t, trace.Statements(), 2)

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
