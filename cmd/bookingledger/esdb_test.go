package main

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/esdb/esdbtest"
	"bookingledger/cmd/bookingledger/internal/servetest"
)

// The EventStoreDB wiring, against the in-process gRPC test server: events go to it, receipts to
// PostgreSQL, and a redelivery is still a duplicate.
func TestServeWithEventStoreDB(t *testing.T) {
	t.Parallel() // each has its own database, ports and processes
	dbURL := servetest.NewDatabaseURL(t)
	es := esdbtest.New(t)
	env := envOf(map[string]string{
		"BOOKINGLEDGER_DATABASE_URL":          dbURL,
		"BOOKINGLEDGER_EVENT_STORE":           es.ConnString(),
		"BOOKINGLEDGER_ADDR":                  "127.0.0.1:0",
		"BOOKINGLEDGER_CALENDLY_SIGNING_KEYS": demoCalendlyKey,
	})
	srv := startServe(t, env)
	base := srv.Base

	waitReady(t, base)

	var out bytes.Buffer
	for range 2 {
		require.NoError(t, run(context.Background(), []string{"send", "calendly", "invitee.created", "--booking", "es1", "--url", base}, env, &out, io.Discard), out.String())
	}
	assert.Contains(t, out.String(), `"status":"accepted"`)
	assert.Contains(t, out.String(), `"status":"duplicate"`)

	srv.Stop(t)

	conn, err := pgx.Connect(context.Background(), dbURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var pgEvents, receipts int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM receipts)`).Scan(&pgEvents, &receipts))
	assert.Zero(t, pgEvents, "events live in EventStoreDB")
	assert.Equal(t, 2, receipts)
}
