package providersync_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/providers"
	"bookingledger/adapters/providersync"
	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
)

// fakeSource answers Sync with fixed pages, or fails after failAfter pages when set.
type fakeSource struct {
	name      string
	mu        sync.Mutex
	pages     []providers.SyncPage
	failAfter int
	windows   []providers.SyncWindow
}

func (f *fakeSource) Name() string { return f.name }

func (f *fakeSource) Sync(_ context.Context, w providers.SyncWindow, page func(providers.SyncPage) error) error {
	f.mu.Lock()
	f.windows = append(f.windows, w)
	pages := f.pages
	f.mu.Unlock()
	for i, p := range pages {
		if f.failAfter > 0 && i == f.failAfter {
			return fmt.Errorf("page %d: %w", i, providers.ErrAPIUnavailable)
		}
		if err := page(p); err != nil {
			return err
		}
	}
	return nil
}

// recordingAlerts keeps what was raised.
type recordingAlerts struct {
	mu     sync.Mutex
	raised []string
}

func (r *recordingAlerts) Raise(_ context.Context, provider, kind, _ string, _ map[string]any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.raised = append(r.raised, provider+" "+kind)
	return nil
}

func (r *recordingAlerts) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.raised...)
}

var (
	start   = time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
	created = time.Date(2029, 12, 20, 10, 0, 0, 0, time.UTC)
)

func scheduled(key string) booking.Event {
	id := booking.ID("test-" + key)
	return booking.Event{ID: providers.EventID("test", key+" created"), Booking: id, Provider: "test", ProviderRef: key + " created",
		OccurredAt: created, Payload: booking.Scheduled{Capacity: 1, Slot: booking.Slot{Meeting: "m-" + key, Resources: []string{"host"},
			Start: start, End: start.Add(30 * time.Minute)}}}
}

func canceled(key string) booking.Event {
	return booking.Event{ID: providers.EventID("test", key+" canceled"), Booking: booking.ID("test-" + key), Provider: "test",
		ProviderRef: key + " canceled", OccurredAt: created.Add(time.Hour), Payload: booking.Canceled{CanceledBy: "host"}}
}

func item(ref string, events ...booking.Event) providers.SyncItem {
	return providers.SyncItem{Ref: ref, Body: []byte(`{"ref":"` + ref + `"}`), Mapped: providers.Mapped{Events: events}}
}

type env struct {
	pool   *pgxpool.Pool
	ledger *ledger.Service
	store  *providersync.Store
	alerts *recordingAlerts
}

func newEnv(t *testing.T) *env {
	t.Helper()
	pool := pgtest.NewDatabase(t)
	return &env{pool: pool, ledger: ledger.NewService(postgres.NewStore(pool), eventcodec.JSON{}),
		store: providersync.NewStore(pool), alerts: &recordingAlerts{}}
}

func (e *env) syncer(src ...providersync.Source) *providersync.Syncer {
	return providersync.NewSyncer(providersync.Config{Store: e.store, Ledger: e.ledger, Sources: src, Alerts: e.alerts,
		Clock: func() time.Time { return created.Add(48 * time.Hour) }})
}

// webhook records events as a webhook delivery would.
func (e *env) webhook(t *testing.T, events ...booking.Event) ledger.Result {
	t.Helper()
	r, err := e.ledger.Record(context.Background(), ledger.Delivery{Receipt: ledger.Receipt{Provider: "test",
		ReceivedAt: created, DeliveryID: "hook " + string(events[0].ID.String())}, Events: events})
	require.NoError(t, err)
	return r
}

func (e *env) streamIDs(t *testing.T, key string) []string {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT event_id::text FROM events WHERE stream_id = $1 ORDER BY version`, booking.ID("test-"+key).Stream())
	require.NoError(t, err)
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	return ids
}

var window = providers.SyncWindow{From: created, To: start.Add(24 * time.Hour)}

func TestSyncRecordsWhatTheWebhooksMissedOnceInAnyOrder(t *testing.T) {
	t.Parallel()
	// Three facts of one booking reach the ledger by webhook, by sync, or both, in every order: each is
	// stored once, with the same event IDs whichever path brought it first.
	orders := []struct {
		name  string
		steps []string // "hook-create", "hook-cancel", "sync"
	}{
		{"sync alone", []string{"sync"}},
		{"sync then late webhooks", []string{"sync", "hook-create", "hook-cancel"}},
		{"webhooks then sync", []string{"hook-create", "hook-cancel", "sync"}},
		{"create by webhook, cancel only by sync", []string{"hook-create", "sync", "sync"}},
		{"cancel by webhook before its create by sync", []string{"hook-cancel", "sync", "hook-create"}},
	}
	for _, o := range orders {
		t.Run(o.name, func(t *testing.T) {
			e := newEnv(t)
			src := &fakeSource{name: "test", pages: []providers.SyncPage{{Items: []providers.SyncItem{item("obj-a", scheduled("a"), canceled("a"))}}}}
			s := e.syncer(src)
			for _, step := range o.steps {
				switch step {
				case "hook-create":
					e.webhook(t, scheduled("a"))
				case "hook-cancel":
					e.webhook(t, canceled("a"))
				case "sync":
					_, err := s.Run(context.Background(), "test", window, false, false)
					require.NoError(t, err)
				}
			}
			ids := e.streamIDs(t, "a")
			assert.ElementsMatch(t, []string{scheduled("a").ID.String(), canceled("a").ID.String()}, ids)
		})
	}
}

func TestSyncCountsAndReceipts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.webhook(t, scheduled("a"))
	unmappable := providers.SyncItem{Ref: "obj-bad", Body: []byte(`{}`), Err: fmt.Errorf("%w: start missing", providers.ErrUnmappable)}
	ignored := providers.SyncItem{Ref: "obj-ignored", Body: []byte(`{}`), Mapped: providers.Mapped{Reason: "draft"}}
	src := &fakeSource{name: "test", pages: []providers.SyncPage{
		{Items: []providers.SyncItem{item("obj-a", scheduled("a")), item("obj-b", scheduled("b"), canceled("b"))}, Cursor: "c1"},
		{Items: []providers.SyncItem{unmappable, ignored}, Cursor: "c2"},
	}}
	s := e.syncer(src)

	dry, err := s.Run(context.Background(), "test", window, true, false)
	require.NoError(t, err)
	assert.Equal(t, providersync.Result{Provider: "test", From: window.From, To: window.To, Fetched: 4, Recorded: 1, Already: 1,
		Ignored: 1, Quarantined: 1, DryRun: true, Events: 2, Missed: []providersync.Missed{{Ref: "obj-b", Bookings: []string{"test-b"}, Events: 2}},
		At: dry.At, Cursor: "c2"}, dry)
	assert.Empty(t, e.streamIDs(t, "b"), "a dry run records nothing")
	var receipts int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM receipts WHERE delivery_id LIKE 'sync:%'`).Scan(&receipts))
	assert.Zero(t, receipts, "a dry run leaves no receipt")

	res, err := s.Run(context.Background(), "test", window, false, true)
	require.NoError(t, err)
	assert.Equal(t, 4, res.Fetched)
	assert.Equal(t, 1, res.Recorded)
	assert.Equal(t, 1, res.Already)
	assert.Equal(t, 1, res.Quarantined)
	assert.Equal(t, 2, res.Events)
	assert.Len(t, e.streamIDs(t, "b"), 2)

	// Every object read left a receipt marked as the sync's, its body kept.
	rows, err := e.pool.Query(context.Background(), `SELECT delivery_id, outcome, headers FROM receipts WHERE delivery_id LIKE 'sync:%' ORDER BY id`)
	require.NoError(t, err)
	type rec struct {
		id, outcome string
		headers     []string
	}
	var got []rec
	for rows.Next() {
		var r rec
		require.NoError(t, rows.Scan(&r.id, &r.outcome, &r.headers))
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	src1 := []string{providersync.SourceHeader + ": sync"}
	assert.Equal(t, []rec{{"sync:obj-a", "duplicate", src1}, {"sync:obj-b", "accepted", src1}, {"sync:obj-bad", "quarantined", src1}, {"sync:obj-ignored", "ignored", src1}}, got)

	st, err := e.store.State(context.Background(), "test")
	require.NoError(t, err)
	assert.Equal(t, "c2", st.Cursor, "a periodic run stores where it ended")
	assert.Equal(t, int64(2), st.MissedTotal)
	assert.Equal(t, 1, st.LastRecorded)
	assert.Empty(t, st.LastError)
	assert.Equal(t, []string{"test missed_webhooks"}, e.alerts.list())

	// Nothing missed the second time: nothing appended, no new alert, the counter unchanged.
	res, err = s.Run(context.Background(), "test", window, false, true)
	require.NoError(t, err)
	assert.Equal(t, 0, res.Recorded)
	assert.Equal(t, 2, res.Already)
	st, err = e.store.State(context.Background(), "test")
	require.NoError(t, err)
	assert.Equal(t, int64(2), st.MissedTotal)
	assert.Equal(t, []string{"test missed_webhooks"}, e.alerts.list())
}

func TestAFailedRunKeepsItsCursorOpensOneItemAndAlertsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	src := &fakeSource{name: "test", pages: []providers.SyncPage{
		{Items: []providers.SyncItem{item("obj-a", scheduled("a"))}, Cursor: "c1"},
		{Items: []providers.SyncItem{item("obj-b", scheduled("b"))}, Cursor: "c2"},
	}, failAfter: 1}
	s := e.syncer(src)
	w := window
	w.Cursor = "c0"
	for range 2 {
		_, err := s.Run(context.Background(), "test", w, false, true)
		require.ErrorIs(t, err, providers.ErrAPIUnavailable)
	}
	st, err := e.store.State(context.Background(), "test")
	require.NoError(t, err)
	assert.Equal(t, "", st.Cursor, "an API error leaves the cursor where it was")
	assert.Contains(t, st.LastError, "unavailable")
	assert.Len(t, e.streamIDs(t, "a"), 1, "what the pages before the error brought is recorded")
	var open int
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM reconciliation_items WHERE kind = 'sync' AND subject = 'test sync' AND closed_at IS NULL`).Scan(&open))
	assert.Equal(t, 1, open)
	assert.Equal(t, []string{"test sync_failed"}, e.alerts.list(), "one alert per failing streak")

	src.mu.Lock()
	src.failAfter = 0
	src.mu.Unlock()
	_, err = s.Run(context.Background(), "test", w, false, true)
	require.NoError(t, err)
	st, err = e.store.State(context.Background(), "test")
	require.NoError(t, err)
	assert.Equal(t, "c2", st.Cursor)
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM reconciliation_items WHERE kind = 'sync' AND subject = 'test sync' AND closed_at IS NULL`).Scan(&open))
	assert.Zero(t, open, "a run that succeeds closes the item")
	assert.Equal(t, []string{"test sync_failed", "test missed_webhooks"}, e.alerts.list())
}

func TestConcurrentRunsAppendEachFactOnce(t *testing.T) {
	t.Parallel()
	// Two serve processes' periodic syncs of one provider at once: the ledger's event IDs keep each
	// fact once.
	e := newEnv(t)
	var items []providers.SyncItem
	for i := range 20 {
		k := fmt.Sprintf("k%d", i)
		items = append(items, item("obj-"+k, scheduled(k), canceled(k)))
	}
	src := &fakeSource{name: "test", pages: []providers.SyncPage{{Items: items[:10]}, {Items: items[10:]}}}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		s := e.syncer(src)
		wg.Go(func() {
			_, err := s.Run(context.Background(), "test", window, false, true)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE stream_id LIKE 'booking-test-%'`).Scan(&n))
	assert.Equal(t, 40, n)
	st, err := e.store.State(context.Background(), "test")
	require.NoError(t, err)
	assert.Equal(t, int64(40), st.MissedTotal, "each appended event counted once across the runs")
}

func TestUnknownProvider(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.syncer().Run(context.Background(), "calendly", window, false, false)
	assert.True(t, errors.Is(err, providersync.ErrUnknownProvider))
}
