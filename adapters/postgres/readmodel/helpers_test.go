package readmodel_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/esdb"
	"bookingledger/adapters/esdb/esdbtest"
	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/eventlogtest"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/privacy"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
	"bookingledger/domain/resource"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
)

// day is the calendar day the scenarios take place on; provider times are the days before it.
var day = time.Date(2027, 3, 15, 0, 0, 0, 0, time.UTC)

var testNamespace = uuid.MustParse("6f1d4f0e-3b7a-4c55-9d0e-8a1b2c3d4e5f")

func eid(parts ...string) eventlog.EventID {
	return eventlog.EventID(uuid.NewSHA1(testNamespace, []byte(strings.Join(parts, " "))))
}

// backend is where one test database's events live: PostgreSQL itself, or one EventStoreDB node.
type backend struct {
	kind string
	esdb *esdbtest.Server // nil on PostgreSQL
}

func newBackend(tb testing.TB, kind string) backend {
	tb.Helper()
	if kind == eventlogtest.StoreESDB {
		return backend{kind: kind, esdb: esdbtest.New(tb)}
	}
	return backend{kind: eventlogtest.StorePostgres}
}

// open returns the event store and the ledger.Store serve builds on it for a process whose pool is
// pool. Every call is a new client, as every process has its own.
// eventLog is what both event stores are: a log and its subscription.
type eventLog interface {
	eventlog.Store
	eventlog.Subscriber
}

func (b backend) open(tb testing.TB, pool *pgxpool.Pool) (eventLog, ledger.Store) {
	tb.Helper()
	pg := postgres.NewStore(pool)
	if b.esdb == nil {
		return pg, pg
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	es, err := esdb.Open(ctx, b.esdb.ConnString())
	require.NoError(tb, err, "open the esdb test server")
	tb.Cleanup(es.Close)
	return es, esdb.NewLedgerStore(es, pg)
}

// env is one fresh database with the selected event store, the ledger service on it and the read model.
type env struct {
	pool    *pgxpool.Pool
	backend backend
	store   eventLog
	ledger  *ledger.Service
	rm      *readmodel.ReadModel
	seq     int
	receive time.Time
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	return newEnvOn(tb, eventlogtest.SelectedStore(tb))
}

// newEnvOn is newEnv with the event store named, for tests that measure one store.
func newEnvOn(tb testing.TB, kind string) *env {
	tb.Helper()
	if _, ok := tb.(*testing.B); ok {
		return newEnvWith(tb, kind, pgtest.NewDatabase(tb)) // benchmarks measure on a fresh database
	}
	return newEnvWith(tb, kind, spares.Database(tb))
}

// spares are the package's test databases: a test that passed gives its database back emptied, with
// its pool's connections, to the next (see pgtest.Spares).
var spares pgtest.Spares

func TestMain(m *testing.M) {
	code := m.Run()
	if err := spares.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = cmp.Or(code, 1)
	}
	os.Exit(code)
}

// newEnvWith is newEnvOn over a pool of its own (migrated and empty).
func newEnvWith(tb testing.TB, kind string, pool *pgxpool.Pool) *env {
	tb.Helper()
	e := &env{pool: pool, backend: newBackend(tb, kind), receive: day.Add(-24 * time.Hour)}
	var ls ledger.Store
	e.store, ls = e.backend.open(tb, pool)
	// As serve builds them: free text kept apart from the events and put back into history.
	e.ledger = ledger.NewService(ls, eventcodec.JSON{})
	e.rm = readmodel.New(pool, e.store, eventcodec.JSON{}, readmodel.Options{Links: eventcodec.JSON{}, Texts: privacy.NewTexts(pool), Log: e.log()})
	return e
}

// log is what serve passes as readmodel.Options.Log: the PostgreSQL store, which lives in the read
// model's database; nil over EventStoreDB.
func (e *env) log() readmodel.LogSource {
	if s, ok := e.store.(*postgres.Store); ok {
		return s
	}
	return nil
}

// stored counts the booking and link events the store holds: the truth the projection must catch up with.
// On PostgreSQL it is the table, which ReadAll may lag (see catchUp). EventStoreDB acknowledges an
// append only once it is in $all, so a full ReadAll is exact there.
func (e *env) stored(tb testing.TB) int64 {
	tb.Helper()
	ctx := context.Background()
	if e.backend.kind == eventlogtest.StorePostgres {
		var n int64
		require.NoError(tb, e.pool.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&n))
		return n
	}
	var (
		n    int64
		from eventlog.Position
	)
	for {
		page, err := e.store.ReadAll(ctx, from, 10000)
		require.NoError(tb, err)
		for _, ev := range page {
			if strings.HasPrefix(ev.StreamID, "booking-") || ev.StreamID == resource.Stream {
				n++
			}
		}
		if len(page) < 10000 {
			return n
		}
		from = page[len(page)-1].Position
	}
}

// delivery is one webhook delivery as the ingress hands it to the ledger.
type delivery struct {
	ID       string
	Provider string
	Events   []booking.Event
}

func (e *env) deliver(t testing.TB, d delivery) ledger.Result {
	t.Helper()
	e.seq++
	res, err := e.ledger.Record(context.Background(), ledger.Delivery{
		Receipt: ledger.Receipt{Provider: d.Provider, ReceivedAt: e.receive.Add(time.Duration(e.seq) * time.Second),
			DeliveryID: d.ID, Secret: "0:3f2a9c", Body: []byte(`{"delivery":"` + d.ID + `"}`)},
		Events: d.Events,
	})
	require.NoError(t, err, "record delivery %s", d.ID)
	return res
}

func (e *env) quarantine(t testing.TB, provider, id, reason string) {
	t.Helper()
	e.seq++
	_, err := e.ledger.Record(context.Background(), ledger.Delivery{
		Receipt: ledger.Receipt{Provider: provider, ReceivedAt: e.receive.Add(time.Duration(e.seq) * time.Second), DeliveryID: id,
			Secret: "0:3f2a9c", Body: []byte(`{"broken":`)},
		MapErr: fmt.Errorf("payload.scheduled_event missing: %s", reason),
	})
	require.NoError(t, err)
}

// catchUp runs the projection until it has applied every event appended so far. ReadAll returns only
// events older than every running transaction of the cluster (transaction ids are cluster-wide, so
// other tests' transactions count too): a single pass may legitimately stop short.
func (e *env) catchUp(t testing.TB) int64 {
	t.Helper()
	return e.catchUpWith(t, projections.RunnerOptions{})
}

// catchUpWith is catchUp with a runner of opts.
func (e *env) catchUpWith(t testing.TB, opts projections.RunnerOptions) int64 {
	t.Helper()
	ctx := context.Background()
	stored := e.stored(t)
	var total int64
	deadline := time.Now().Add(time.Minute)
	// The next pass can only apply more once an older transaction has ended: try again soon, then
	// less often (a pass costs a few statements, and tests run many at once).
	pause := time.Millisecond
	for {
		n, err := e.rm.Pass(opts).CatchUp(ctx)
		require.NoError(t, err)
		total += n
		cp, err := e.rm.Checkpoint(ctx)
		require.NoError(t, err)
		if cp.EventsApplied >= stored {
			return total
		}
		require.True(t, time.Now().Before(deadline), "projection stuck at %d of %d events", cp.EventsApplied, stored)
		if n > 0 {
			pause = time.Millisecond
		}
		time.Sleep(pause)
		pause = min(2*pause, 25*time.Millisecond)
	}
}

// waitVisible waits until ReadAll can return every event stored so far, that is, until no running
// transaction of the cluster is older than the last one that appended (PostgreSQL only). A catch-up
// after it reads the events in full batches, whatever the other tests' transactions do.
func (e *env) waitVisible(t testing.TB) {
	t.Helper()
	require.Equal(t, eventlogtest.StorePostgres, e.backend.kind)
	require.Eventually(t, func() bool {
		var visible bool
		require.NoError(t, e.pool.QueryRow(context.Background(),
			`SELECT coalesce(max(tx_id) < pg_snapshot_xmin(pg_current_snapshot()), true) FROM events`).Scan(&visible))
		return visible
	}, time.Minute, 5*time.Millisecond, "events stay hidden behind an old transaction")
}

func (e *env) booking(t testing.TB, id booking.ID) calendar.Booking {
	t.Helper()
	b, err := e.rm.Booking(context.Background(), id)
	require.NoError(t, err, "booking %s", id)
	return b
}

func (e *env) openItems(t testing.TB) []calendar.Item {
	t.Helper()
	items, err := e.rm.OpenItems(context.Background())
	require.NoError(t, err)
	return items
}

// holders returns the bookings holding a slot according to the slot table itself.
func (e *env) holders(t testing.TB) []string {
	t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT DISTINCT booking FROM calendar_slots WHERE holder ORDER BY booking`)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// Event builders. A booking's ID is "<provider>-<key>"; provider times are fixed, so every run of a
// scenario carries the same events.

func at(hour, minute int) time.Time {
	return day.Add(time.Duration(hour)*time.Hour + time.Duration(minute)*time.Minute)
}

func slot(meeting string, start time.Time, minutes int, resources ...string) booking.Slot {
	return booking.Slot{Meeting: meeting, Resources: resources, Start: start, End: start.Add(time.Duration(minutes) * time.Minute)}
}

func event(b booking.ID, ref string, occurred time.Time, p booking.Payload) booking.Event {
	provider, _, _ := strings.Cut(string(b), "-")
	return booking.Event{ID: eid(string(b), ref), Booking: b, Provider: provider, ProviderRef: string(b) + " " + ref,
		OccurredAt: occurred, Payload: p}
}

func created(b booking.ID, occurred time.Time, s booking.Slot) booking.Event {
	return event(b, "created", occurred, booking.Scheduled{Slot: s, Capacity: 1})
}

func canceled(b booking.ID, occurred time.Time, reason string) booking.Event {
	return event(b, "canceled", occurred, booking.Canceled{Reason: reason, CanceledBy: "invitee"})
}

func one(id string, e booking.Event) delivery {
	return delivery{ID: id, Provider: e.Provider, Events: []booking.Event{e}}
}

func itemSubjects(items []calendar.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, string(it.Kind)+": "+it.Subject)
	}
	slices.Sort(out)
	return out
}
