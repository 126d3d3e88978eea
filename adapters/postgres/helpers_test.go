package postgres_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/domain/eventlog"
)

// spares are the package's test databases: a test that passed gives its database back emptied, with
// its pool's warm connections, to the next (see pgtest.Spares).
var spares pgtest.Spares

func TestMain(m *testing.M) {
	code := m.Run()
	if err := spares.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = cmp.Or(code, 1)
	}
	os.Exit(code)
}

// newStore is a store on an empty migrated database, a spare one when there is one. The pool is not
// the test's to close. At the end of the test the store's own work is waited out before the database
// goes back (see settle).
func newStore(t *testing.T) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	pool := spares.Database(t)
	s := postgres.NewStore(pool)
	t.Cleanup(func() { settle(t, s) })
	return s, pool
}

// settle waits until the store's own work has ended (a group commit whose callers gave up, the
// notification after the last write), so that none of it reaches the next test's database; the spare
// itself then waits for the connections the test ended to be gone (pgtest.Spares).
func settle(t *testing.T, s *postgres.Store) {
	deadline := time.Now().Add(30 * time.Second)
	for !postgres.Quiet(s) {
		if time.Now().After(deadline) {
			t.Errorf("the store's work did not end within 30 s")
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newFreshStore is newStore on a database of the test's own, never used before: for a test that
// changes the schema (which Spares would drop anyway) or explains plans over never-used tables.
func newFreshStore(t *testing.T) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.NewDatabase(t)
	return postgres.NewStore(pool), pool
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newID(t testing.TB) eventlog.EventID {
	t.Helper()
	var id eventlog.EventID
	_, err := rand.Read(id[:])
	require.NoError(t, err)
	return id
}

func streamName(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return "booking-" + hex.EncodeToString(b[:])
}

func event(t testing.TB, typ string) eventlog.EventData {
	t.Helper()
	return eventlog.EventData{ID: newID(t), Type: typ, Data: []byte(`{"n":1}`), Metadata: []byte(`{}`)}
}

func events(t testing.TB, n int) []eventlog.EventData {
	t.Helper()
	out := make([]eventlog.EventData, n)
	for i := range out {
		out[i] = event(t, "booking.scheduled.v1")
	}
	return out
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}
