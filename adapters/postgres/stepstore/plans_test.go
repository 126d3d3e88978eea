package stepstore

import (
	"bookingledger/adapters/process"
	"cmp"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/jobs"
	"bookingledger/adapters/jobs/jobstest"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/adapters/postgres/pgtest/plantest"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/domain/ledger"
	"bookingledger/projections"
)

// TestPlanningReadsStayIndexed: the process projection's batch reads the calendar (the touched
// bookings' rows, the bookings whose claims overlap theirs through bl_overlapping_claims, the
// reschedule chains) and the steps of the threads it plans, and writes steps by key. The statements
// are the ones the projection sent while planning a scenario of a conflict, a slot handed over, a
// slot taken and given back, and a reschedule chain; each is explained with the arguments it was sent
// with, under the settings the projection's transaction set (checkpoint.IndexedPlanning, ADR 0019),
// over the empty, never-analyzed tables of a freshly migrated database (where a fresh install's first
// batches plan) and over tables of a few thousand analyzed rows. Two plans of each: the custom plan
// for those values (a connection's first five executions of a statement), and the plan the
// connection keeps from its sixth (the generic plan, when PostgreSQL finds it no dearer). No plan may
// read one of the tables without an index condition (plantest's rule, which the calendar's tests
// share). Without enable_seqscan = off, the steps of the planned threads (WHERE thread = ANY($1) OR
// booking = ANY($1) ... FOR UPDATE) planned, custom and kept, as a Seq Scan of the empty process_steps
// of a fresh database, and the connection kept it while the table grew.
func TestPlanningReadsStayIndexed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newTracedPlanWorld(t)
	w.play(t)

	for _, want := range []string{"FROM calendar_bookings WHERE booking = ANY", "bl_overlapping_claims", "FROM process_steps WHERE thread = ANY",
		"UPDATE process_steps SET state = 'skipped'", "UPDATE process_steps SET state = 'pending'", "INSERT INTO process_steps"} {
		require.Contains(t, w.trace.Text(), want, "the scenario never sent it")
	}
	var handedOver int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM process_steps WHERE thread = 'calendly-p2'`).Scan(&handedOver))
	require.Positive(t, handedOver, "the slot handed over planned steps for the booking that had no event")

	fillStepsAndCalendar(t, w.pool)
	settings := w.trace.Settings()
	// Each statement is planned once per connection (ADR 0019, 2026-12-06): the kept plans explained
	// below are the generic plans every execution then runs.
	require.Contains(t, settings, "plan_cache_mode = force_generic_plan")
	for _, db := range []struct{ name, url string }{{"empty", pgtest.NewDatabaseURL(t)}, {"filled", w.url}} {
		conn := plantest.Connect(t, db.url, settings...)
		for _, s := range w.trace.Statements() {
			planned.Check(t, conn, fmt.Sprintf("%s database (settings %v)", db.name, settings), s, plantest.Custom, plantest.Kept)
		}
	}
}

// planWorld is a migrated database with River's tables, the PostgreSQL event store and ledger, and the
// calendar and process projections on their runners, as serve builds them, on a pool whose statements
// are traced while the process projection applies.
type planWorld struct {
	url      string // of a traced world's database
	pool     *pgxpool.Pool
	trace    *plantest.Trace
	ledger   *ledger.Service
	calendar *projections.Runner
	process  *projections.Runner
	seq      int
}

func newPlanWorld(t *testing.T) *planWorld { t.Helper(); return newPlanWorldFor(t, both) }

// spares are the package's test databases, River's tables in them: a test that passed gives its
// database back emptied, with its pool's warm connections, to the next (see pgtest.Spares).
var spares = pgtest.Spares{Extra: jobstest.Template}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := spares.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = cmp.Or(code, 1)
	}
	os.Exit(code)
}

// newPlanWorldFor is newPlanWorld with the process projection planning for targets, on a spare
// database; its statements are not traced.
func newPlanWorldFor(t *testing.T, targets process.Targets) *planWorld {
	t.Helper()
	w := &planWorld{trace: &plantest.Trace{Naming: planned.Watched, Max: 3}, pool: spares.Database(t)}
	return w.build(t, targets)
}

// newTracedPlanWorld is newPlanWorld on a database of its own, never used before (its plans are
// explained over never-analyzed tables, and it analyzes them), whose pool traces the statements.
func newTracedPlanWorld(t *testing.T) *planWorld {
	t.Helper()
	w := &planWorld{trace: &plantest.Trace{Naming: planned.Watched, Max: 3}}
	w.url = pgtest.NewDatabaseURLWith(t, jobstest.Template)
	cfg, err := pgxpool.ParseConfig(w.url)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = w.trace
	w.pool, err = pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(w.pool.Close)
	return w.build(t, both)
}

// build puts the stores and runners on w.pool.
func (w *planWorld) build(t *testing.T, targets process.Targets) *planWorld {
	t.Helper()
	ctx := context.Background()
	_, err := jobs.Migrate(ctx, w.pool, nil) // a no-op when the template has River's newest migrations
	require.NoError(t, err)

	store := postgres.NewStore(w.pool)
	w.ledger = ledger.NewService(store, eventcodec.JSON{})
	rm := readmodel.New(w.pool, store, eventcodec.JSON{}, readmodel.Options{})
	locker := keepLeases(t, w.pool)
	w.calendar = projections.NewRunner(store, rm, locker, projections.RunnerOptions{})
	client, err := InsertOnlyClient(w.pool)
	require.NoError(t, err)
	proj, err := NewProjection(ProjectionConfig{Pool: w.pool, Calendar: readmodel.NewStepReader(w.pool), Client: client, Targets: targets})
	require.NoError(t, err)
	w.process = projections.NewRunner(store, proj, locker, projections.RunnerOptions{})
	return w
}

// keptLocker keeps each projection's lease from its runner's first CatchUp to the end of the test, as
// a running serve keeps it, instead of taking a new one for every CatchUp: a checkpoint.Locker's lease
// is a connection taken out of the pool and closed when released, so the pool opened a new one for
// every CatchUp of the test's (a few dozen a test).
type keptLocker struct {
	locker *checkpoint.Locker
	mu     sync.Mutex
	leases map[string]projections.Lease
}

// keepLeases is a keptLocker over a checkpoint.Locker on pool whose leases are released when t ends
// (the spare database then waits for their sessions to end: pgtest.Spares).
func keepLeases(t *testing.T, pool *pgxpool.Pool) *keptLocker {
	k := &keptLocker{locker: checkpoint.NewLocker(pool), leases: map[string]projections.Lease{}}
	t.Cleanup(func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if len(k.leases) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, le := range k.leases {
			le.Release(ctx)
		}
	})
	return k
}

// TryAcquire implements projections.Locker: the lease held, unless it was lost, else a new one.
func (k *keptLocker) TryAcquire(ctx context.Context, name string) (projections.Lease, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if le, ok := k.leases[name]; ok {
		select {
		case <-le.Lost():
			le.Release(ctx)
			delete(k.leases, name)
		default:
			return keptLease{le}, nil
		}
	}
	le, err := k.locker.TryAcquire(ctx, name)
	if err != nil || le == nil {
		return nil, err
	}
	k.leases[name] = le
	return keptLease{le}, nil
}

// keptLease is a kept lease as its runner sees it: released at the end of the test, not by the runner.
type keptLease struct{ projections.Lease }

func (keptLease) Release(context.Context) {}

// play delivers the scenario one delivery at a time, bringing the calendar and then the process
// projection up to date after each, so every delivery is a batch of its own; only the process
// projection's statements are traced.
func (w *planWorld) play(t *testing.T) {
	t.Helper()
	host, other := "https://api.calendly.com/users/HOST-P", "https://api.calendly.com/users/HOST-Q"
	for _, e := range []booking.Event{
		// p1 holds the slot; p2, another meeting, is in conflict and gets no step.
		planEvent("calendly-p1", "created", t1.Add(-72*time.Hour), booking.Scheduled{Slot: slotAt(t1, "m-1", host), Capacity: 1}),
		planEvent("calendly-p2", "created", t1.Add(-71*time.Hour), booking.Scheduled{Slot: slotAt(t1, "m-2", host), Capacity: 1}),
		// p1's cancel hands the slot to p2, which had no event: found through the overlapping claims.
		planEvent("calendly-p1", "canceled", t1.Add(-70*time.Hour), booking.Canceled{Reason: "x", CanceledBy: "invitee"}),
		// p3 holds a slot until p4, scheduled earlier at the provider, arrives and takes it: p3's steps
		// are skipped; p4's cancel gives the slot back and revives them.
		planEvent("calendly-p3", "created", t1.Add(-69*time.Hour), booking.Scheduled{Slot: slotAt(t2, "m-3", other), Capacity: 1}),
		planEvent("calendly-p4", "created", t1.Add(-80*time.Hour), booking.Scheduled{Slot: slotAt(t2, "m-4", other), Capacity: 1}),
		planEvent("calendly-p4", "canceled", t1.Add(-68*time.Hour), booking.Canceled{Reason: "x", CanceledBy: "host"}),
		// A reschedule chain: p5 moved to p6, then p6 moved to p7.
		planEvent("calendly-p5", "created", t1.Add(-67*time.Hour), booking.Scheduled{Slot: slotAt(t1.Add(2*time.Hour), "m-5", host), Capacity: 1}),
		planEvent("calendly-p5", "canceled", t1.Add(-66*time.Hour), booking.Canceled{Reason: "moved", CanceledBy: "invitee", RescheduledTo: "calendly-p6"}),
		planEvent("calendly-p6", "created", t1.Add(-66*time.Hour), booking.Scheduled{Slot: slotAt(t1.Add(3*time.Hour), "m-6", host), Capacity: 1, RescheduledFrom: "calendly-p5"}),
		planEvent("calendly-p6", "canceled", t1.Add(-65*time.Hour), booking.Canceled{Reason: "moved", CanceledBy: "invitee", RescheduledTo: "calendly-p7"}),
		planEvent("calendly-p7", "created", t1.Add(-65*time.Hour), booking.Scheduled{Slot: slotAt(t1.Add(4*time.Hour), "m-7", host), Capacity: 1, RescheduledFrom: "calendly-p6"}),
	} {
		w.record(t, e)
		w.catchUp(t, w.calendar, readmodel.ProjectionName)
		w.trace.On.Store(true)
		w.catchUp(t, w.process, ProjectionName)
		w.trace.On.Store(false)
	}
}

// record stores e as a delivery of its own.
func (w *planWorld) record(t *testing.T, e booking.Event) {
	t.Helper()
	w.seq++
	_, err := w.ledger.Record(context.Background(), ledger.Delivery{
		Receipt: ledger.Receipt{Provider: e.Provider, ReceivedAt: t1.Add(-64*time.Hour + time.Duration(w.seq)*time.Second),
			DeliveryID: fmt.Sprintf("plans-%d", w.seq), Secret: "0:3f2a9c", Body: []byte(`{}`)},
		Events: []booking.Event{e},
	})
	require.NoError(t, err, "record %s %s", e.Booking, e.Type())
}

// catchUp runs r until its projection has applied every event stored. ReadAll returns only events
// older than every running transaction of the cluster (other tests' too): one pass may stop short.
func (w *planWorld) catchUp(t *testing.T, r *projections.Runner, name string) {
	t.Helper()
	ctx := context.Background()
	var stored int64
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM events`).Scan(&stored))
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := r.CatchUp(ctx)
		require.NoError(t, err)
		cp, err := checkpoint.Read(ctx, w.pool, name)
		require.NoError(t, err)
		if cp.EventsApplied >= stored {
			return
		}
		require.True(t, time.Now().Before(deadline), "%s stuck at %d of %d events", name, cp.EventsApplied, stored)
		time.Sleep(5 * time.Millisecond)
	}
}

var (
	t1   = time.Date(2030, 1, 7, 9, 0, 0, 0, time.UTC)
	t2   = t1.Add(24 * time.Hour)
	both = process.Targets{Calendar: true, Email: true}
)

var planNamespace = uuid.MustParse("0b5b3c4e-58a4-4d1e-9a53-4f0f6f1c2d71")

func planEvent(id booking.ID, ref string, occurred time.Time, p booking.Payload) booking.Event {
	return booking.Event{ID: eventlog.EventID(uuid.NewSHA1(planNamespace, []byte(string(id)+" "+ref))), Booking: id, Provider: "calendly",
		ProviderRef: string(id) + " " + ref, OccurredAt: occurred, Payload: p}
}

func slotAt(start time.Time, meeting string, resources ...string) booking.Slot {
	return booking.Slot{Meeting: "https://api.calendly.com/scheduled_events/" + meeting, Resources: resources, Start: start, End: start.Add(30 * time.Minute)}
}

// fillStepsAndCalendar adds a few thousand rows to the tables the projection reads, beside the
// scenario's, and analyzes them: 5,000 resources (as readmodel's plans test has; with a few hundred, a
// custom plan may read calendar_resources whole, which the planner rightly finds cheaper then, and
// plans again at every execution), 5,000 bookings and claims on 500 of them, 10,000 steps.
func fillStepsAndCalendar(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
INSERT INTO calendar_resources (resource) SELECT 'fill-host-' || i FROM generate_series(0, 4999) i;
INSERT INTO calendar_bookings (booking, provider, meeting, resources, during, status, booking_status, holder, rescheduled_from)
SELECT 'fill-' || i, 'calendly', 'm-' || i, ARRAY['fill-host-' || (i % 500)],
       tstzrange('2031-01-01'::timestamptz + i * interval '1 hour', '2031-01-01'::timestamptz + i * interval '1 hour' + interval '30 minutes'),
       'active', 'active', true, CASE WHEN i % 10 = 0 THEN 'fill-' || (i - 1) ELSE '' END
FROM generate_series(1, 5000) i;
INSERT INTO calendar_slots (booking, resource_id, resource, meeting, during, priority_at, holder)
SELECT 'fill-' || i, r.id, r.resource, 'm-' || i,
       tstzrange('2031-01-01'::timestamptz + i * interval '1 hour', '2031-01-01'::timestamptz + i * interval '1 hour' + interval '30 minutes'),
       '2030-12-01', true
FROM generate_series(1, 5000) i JOIN calendar_resources r ON r.resource = 'fill-host-' || (i % 500);
INSERT INTO process_steps (key, kind, thread, booking, state, answers, resource, slot_start, slot_end)
SELECT gen_random_uuid(), k.kind, 'fill-' || i, 'fill-' || i, 'done', 'active', 'fill-host-' || (i % 500),
       '2031-01-01'::timestamptz + i * interval '1 hour', '2031-01-01'::timestamptz + i * interval '1 hour' + interval '30 minutes'
FROM generate_series(1, 5000) i CROSS JOIN (VALUES ('host_calendar.create'), ('invitee_email.confirmation')) k(kind);
ANALYZE calendar_resources, calendar_bookings, calendar_slots, process_steps`)
	require.NoError(t, err, "fill the steps and the calendar")
}

// planned are the tables the projection reads by key, each through an index. projection_checkpoints
// (a row per projection) and River's tables are not the projection's to plan.
var planned = plantest.Rule{Watched: []string{"calendar_bookings", "calendar_slots", "calendar_resources", "process_steps", "bl_overlapping_claims"}}

// TestPlanBookingsFollowsSlotsAndChains: the scenario of TestPlanningReadsStayIndexed, with no worker
// running, leaves each thread the steps of its latest booking. A canceled holder's slot goes to the
// booking in conflict (p2, found through the overlapping claims); a booking that lost its slot (p3)
// gets its skipped steps back when the slot is given back; a reschedule chain (p5 → p6 → p7, each
// delivery its own batch) is one thread named after its first booking, whose steps are p7's and whose
// superseded ones are skipped.
func TestPlanBookingsFollowsSlotsAndChains(t *testing.T) {
	t.Parallel()
	w := newPlanWorld(t)
	w.play(t)
	r, err := w.pool.Query(context.Background(), `SELECT thread || ' ' || booking || ' ' || kind || ' ' || state || ' ' || answers FROM process_steps ORDER BY id`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(r, pgx.RowTo[string])
	require.NoError(t, err)
	var want []string
	for _, s := range []struct{ thread, booking, state, slot string }{
		{"p1", "p1", "skipped", "2030-01-07T09:00:00Z–2030-01-07T09:30:00Z"},
		{"p2", "p2", "pending", "2030-01-07T09:00:00Z–2030-01-07T09:30:00Z"},
		{"p3", "p3", "pending", "2030-01-08T09:00:00Z–2030-01-08T09:30:00Z"},
		{"p4", "p4", "skipped", "2030-01-08T09:00:00Z–2030-01-08T09:30:00Z"},
		{"p5", "p5", "skipped", "2030-01-07T11:00:00Z–2030-01-07T11:30:00Z"},
		{"p5", "p6", "skipped", "2030-01-07T12:00:00Z–2030-01-07T12:30:00Z"},
		{"p5", "p7", "pending", "2030-01-07T13:00:00Z–2030-01-07T13:30:00Z"},
	} {
		for _, k := range []process.Kind{process.CalendarCreate, process.EmailConfirmation} {
			want = append(want, fmt.Sprintf("calendly-%s calendly-%s %s %s active %s", s.thread, s.booking, k, s.state, s.slot))
		}
	}
	require.Equal(t, want, got)
}

// TestPlanningOneTargetPlansItsSteps: with email configured and no calendar, the projection plans the
// email steps (and no calendar step).
func TestPlanningOneTargetPlansItsSteps(t *testing.T) {
	t.Parallel()
	w := newPlanWorldFor(t, process.Targets{Email: true})
	w.play(t)
	var kinds []string
	require.NoError(t, pgxscan(w.pool, &kinds, `SELECT DISTINCT kind FROM process_steps ORDER BY kind`))
	require.Equal(t, []string{string(process.EmailConfirmation)}, kinds)
}

// TestInsertJobsQueuesEveryStep: a plan of more steps than one insert takes (a rebuild's) gets a job
// for each, on the steps queue, with the step's attempts.
func TestInsertJobsQueuesEveryStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPlanWorld(t)
	client, err := InsertOnlyClient(w.pool)
	require.NoError(t, err)
	ids := make([]process.StepArgs, 2*process.MaxJobsPerInsert+1)
	for i := range ids {
		ids[i] = process.StepArgs{Step: int64(i + 1), Booking: fmt.Sprintf("calendly-b%d", i)}
	}
	require.NoError(t, pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error { return process.InsertJobs(ctx, tx, client, ids, 7) }))
	var n, steps int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT args->>'step') FROM river_job WHERE kind = $1 AND queue = $2 AND max_attempts = 7`,
		process.StepArgs{}.Kind(), process.Queue).Scan(&n, &steps))
	require.Equal(t, len(ids), n)
	require.Equal(t, len(ids), steps)
	var bookings int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'booking' = 'calendly-b' || (args->>'step')::int - 1`,
		process.StepArgs{}.Kind()).Scan(&bookings))
	require.Equal(t, len(ids), bookings, "each job names its step's booking")
}

func pgxscan(pool *pgxpool.Pool, out *[]string, sql string) error {
	r, err := pool.Query(context.Background(), sql)
	if err != nil {
		return err
	}
	*out, err = pgx.CollectRows(r, pgx.RowTo[string])
	return err
}

// TestPlanBookingsReturnsRevivedSteps: a skipped step that never ran and is wanted again is pending
// and among the ids that get a job (nothing else would run it), and planning again returns nothing.
func TestPlanBookingsReturnsRevivedSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newPlanWorld(t)
	w.play(t)
	var skipped []int64
	r, err := w.pool.Query(ctx, `UPDATE process_steps SET state = 'skipped' WHERE booking = 'calendly-p3' RETURNING id`)
	require.NoError(t, err)
	skipped, err = pgx.CollectRows(r, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Len(t, skipped, 2)
	plan := func() []int64 {
		var ids []int64
		require.NoError(t, pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
			jobs, err := PlanBookings(ctx, tx, readmodel.NewStepReader(w.pool), []string{"calendly-p3"}, both)
			for _, j := range jobs {
				ids = append(ids, j.Step)
				require.Equal(t, "calendly-p3", j.Booking)
			}
			return err
		}))
		return ids
	}
	require.ElementsMatch(t, skipped, plan())
	var pending int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM process_steps WHERE booking = 'calendly-p3' AND state = 'pending'`).Scan(&pending))
	require.Equal(t, 2, pending)
	require.Empty(t, plan())
}

// TestPlanBookingsFollowsSeries: Cal.com's "cancel all remaining" arrives for one occurrence (the
// second of four) and the calendar cancels the later ones; their pending steps are skipped too,
// though no event of theirs arrived. The first occurrence, before the cancel, keeps its steps.
func TestPlanBookingsFollowsSeries(t *testing.T) {
	t.Parallel()
	w := newPlanWorld(t)
	host := "calcom-user-1842"
	week := 7 * 24 * time.Hour
	for i := range 4 {
		id := booking.ID(fmt.Sprintf("calcom-occ%d", i+1))
		w.record(t, planEvent(id, "created", t1.Add(-80*time.Hour), booking.Scheduled{Slot: slotAt(t1.Add(time.Duration(i)*week), string(id), host), Capacity: 1}))
		w.record(t, planEvent(id, "series", t1.Add(-80*time.Hour), booking.SeriesJoined{Series: "calcom-series-r1"}))
	}
	w.catchUp(t, w.calendar, readmodel.ProjectionName)
	w.catchUp(t, w.process, ProjectionName)
	w.record(t, planEvent("calcom-occ2", "canceled", t1.Add(time.Hour), booking.Canceled{Reason: "paused", CanceledBy: "host"}))
	w.record(t, planEvent("calcom-occ2", "series-cancel", t1.Add(time.Hour), booking.SeriesCanceled{CanceledBy: "host"}))
	w.catchUp(t, w.calendar, readmodel.ProjectionName)
	w.catchUp(t, w.process, ProjectionName)

	r, err := w.pool.Query(context.Background(), `SELECT booking || ' ' || kind || ' ' || state FROM process_steps ORDER BY booking, kind`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(r, pgx.RowTo[string])
	require.NoError(t, err)
	var want []string
	for i, state := range []process.State{process.StatePending, process.StateSkipped, process.StateSkipped, process.StateSkipped} {
		for _, k := range []process.Kind{process.CalendarCreate, process.EmailConfirmation} {
			want = append(want, fmt.Sprintf("calcom-occ%d %s %s", i+1, k, state))
		}
	}
	require.Equal(t, want, got)
}
