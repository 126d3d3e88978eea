package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/domain/eventlog"
)

func newStore(t *testing.T) (*postgres.Store, *pgxpool.Pool) {
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
