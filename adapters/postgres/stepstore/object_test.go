package stepstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/pgtest/plantest"
	"bookingledger/adapters/process"
)

// QueueObject reads a thread's calendar object as an update or a delete needs it: the href of its
// done create, the ETag of the thread's last write before the step, how many updates were done before
// it, and the create's key; nothing for a thread without a done create. Its one statement plans
// with indexes on a database analyzed empty and on a filled one.
func TestQueueObjectReadsTheThreadsObjectIndexed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	trace := &plantest.Trace{Naming: []string{"process_steps"}}
	url := pgtest.NewDatabaseURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = trace
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	step := func(thread, kind, state, href, etag string) (int64, uuid.UUID) {
		t.Helper()
		key := uuid.New()
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO process_steps (key, kind, thread, booking, answers, state, target_href, target_etag)
VALUES ($1, $2, $3, $3, 'active', $4, $5, $6) RETURNING id`, key, kind, thread, state, href, etag).Scan(&id))
		return id, key
	}
	_, err = pool.Exec(ctx, `INSERT INTO process_steps (key, kind, thread, booking, answers, state, target_href, target_etag)
SELECT gen_random_uuid(), 'host_calendar.create', 'calendly-fill-' || n, 'calendly-fill-' || n, 'active', 'done', '/dav/' || n || '.ics', '"e"'
FROM generate_series(1, 3000) n`)
	require.NoError(t, err)
	step("calendly-o1", "host_calendar.create", "skipped", "/dav/never.ics", "")
	_, createKey := step("calendly-o1", "host_calendar.create", "done", "/dav/o1.ics", `"e1"`)
	step("calendly-o1", "host_calendar.update", "done", "/dav/o1.ics", `"e2"`)
	update, _ := step("calendly-o1", "host_calendar.update", "pending", "", "")
	step("calendly-o1", "host_calendar.update", "done", "/dav/o1.ics", `"e-later"`) // after the step: not its
	none, _ := step("calendly-o2", "host_calendar.delete", "pending", "", "")
	_, err = pool.Exec(ctx, `ANALYZE process_steps`)
	require.NoError(t, err)

	store := NewStore(pool, nil)
	var got, empty process.ThreadObject
	var gotErr, emptyErr error
	b := &pgx.Batch{}
	trace.On.Store(true)
	store.QueueObject(b, "calendly-o1", update, &got, &gotErr)
	store.QueueObject(b, "calendly-o2", none, &empty, &emptyErr)
	require.NoError(t, pool.SendBatch(ctx, b).Close())
	trace.On.Store(false)
	require.NoError(t, gotErr)
	require.NoError(t, emptyErr)
	assert.Equal(t, process.ThreadObject{Href: "/dav/o1.ics", ETag: `"e2"`, Seq: 1, CreateKey: createKey}, got)
	assert.Equal(t, process.ThreadObject{}, empty)

	settings := trace.Settings()
	require.Contains(t, settings, "enable_seqscan = off")
	require.Len(t, trace.Statements(), 1)
	emptied := pgtest.NewDatabaseURL(t)
	_, err = plantest.Connect(t, emptied).Exec(ctx, `ANALYZE process_steps`)
	require.NoError(t, err)
	rule := plantest.Rule{Watched: []string{"process_steps"}}
	for _, db := range []struct{ name, url string }{{"empty", emptied}, {"filled", url}} {
		conn := plantest.Connect(t, db.url, settings...)
		for _, s := range trace.Statements() {
			rule.Check(t, conn, fmt.Sprintf("%s database (settings %v)", db.name, settings), s, plantest.Custom, plantest.Kept)
		}
	}
}
