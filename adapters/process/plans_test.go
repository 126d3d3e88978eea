package process

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/jobs"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/pgtest"
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
// read one of the tables without an index condition, as in readmodel's plans_test.go. Without
// enable_seqscan = off, the steps of the planned threads (WHERE thread = ANY($1) OR booking = ANY($1)
// ... FOR UPDATE) planned, custom and kept, as a Seq Scan of the empty process_steps of a fresh
// database, and the connection kept it while the table grew.
func TestPlanningReadsStayIndexed(t *testing.T) {
	ctx := context.Background()
	w := newPlanWorld(t)
	w.play(t)

	probes, settings := w.trace.probes(), w.trace.settings()
	sent := make([]string, len(probes))
	for i, p := range probes {
		sent[i] = p.sql
	}
	for _, want := range []string{"FROM calendar_bookings WHERE booking = ANY", "bl_overlapping_claims", "FROM process_steps WHERE thread = ANY",
		"UPDATE process_steps SET state = 'skipped'", "UPDATE process_steps SET state = 'pending'", "INSERT INTO process_steps"} {
		require.Contains(t, strings.Join(sent, "\n"), want, "the scenario never sent it")
	}
	var handedOver int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM process_steps WHERE thread = 'calendly-p2'`).Scan(&handedOver))
	require.Positive(t, handedOver, "the slot handed over planned steps for the booking that had no event")

	fillStepsAndCalendar(t, w.pool)
	for _, db := range []struct{ name, url string }{{"empty", pgtest.NewDatabaseURL(t)}, {"filled", w.url}} {
		conn := planningConn(t, db.url, settings)
		leading := leadingKeys(t, conn)
		for i, p := range probes {
			for _, mode := range []string{"custom", "kept"} {
				bad, text, err := explainProbe(ctx, conn, leading, fmt.Sprintf("steps_probe_%d", i), mode, p)
				if !assert.NoError(t, err, "%s\nargs: %s", p.sql, p.argsText()) {
					continue
				}
				t.Logf("%s database, %s plan of\n%s\nargs: %s\n%s", db.name, mode, p.sql, p.argsText(), text)
				for _, b := range bad {
					assert.Failf(t, "plan reads a table without an index condition", "%s database, %s plan: %s\nin: %s\nargs: %s\nsettings: %v\nplan:\n%s",
						db.name, mode, b, p.sql, p.argsText(), settings, text)
				}
			}
		}
	}
}

// planWorld is a migrated database with River's tables, the PostgreSQL event store and ledger, and the
// calendar and process projections on their runners, as serve builds them, on a pool whose statements
// are traced while the process projection applies.
type planWorld struct {
	url      string
	pool     *pgxpool.Pool
	trace    *stepsTrace
	ledger   *ledger.Service
	calendar *projections.Runner
	process  *projections.Runner
	seq      int
}

func newPlanWorld(t *testing.T) *planWorld {
	t.Helper()
	ctx := context.Background()
	w := &planWorld{trace: &stepsTrace{}}
	w.url = pgtest.NewDatabaseURL(t)
	cfg, err := pgxpool.ParseConfig(w.url)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = w.trace
	w.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(w.pool.Close)
	_, err = jobs.Migrate(ctx, w.pool, nil)
	require.NoError(t, err)

	store := postgres.NewStore(w.pool)
	w.ledger = ledger.NewService(store, eventcodec.JSON{})
	rm := readmodel.New(w.pool, store, eventcodec.JSON{}, readmodel.Options{})
	w.calendar = projections.NewRunner(store, rm, checkpoint.NewLocker(w.pool), projections.RunnerOptions{})
	client, err := InsertOnlyClient(w.pool)
	require.NoError(t, err)
	proj, err := NewProjection(ProjectionConfig{Pool: w.pool, Client: client, Targets: both})
	require.NoError(t, err)
	w.process = projections.NewRunner(store, proj, checkpoint.NewLocker(w.pool), projections.RunnerOptions{})
	return w
}

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
		w.seq++
		_, err := w.ledger.Record(context.Background(), ledger.Delivery{
			Receipt: ledger.Receipt{Provider: e.Provider, ReceivedAt: t1.Add(-64*time.Hour + time.Duration(w.seq)*time.Second),
				DeliveryID: fmt.Sprintf("plans-%d", w.seq), Secret: "0:3f2a9c", Body: []byte(`{}`)},
			Events: []booking.Event{e},
		})
		require.NoError(t, err, "record %s %s", e.Booking, e.Type())
		w.catchUp(t, w.calendar, readmodel.ProjectionName)
		w.trace.on.Store(true)
		w.catchUp(t, w.process, Name)
		w.trace.on.Store(false)
	}
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

// probe is one statement the projection sent, with the arguments it was sent with.
type probe struct {
	sql  string
	args []any
}

func (p probe) argsText() string {
	parts := make([]string, len(p.args))
	for i, a := range p.args {
		parts[i] = fmt.Sprintf("$%d=%v", i+1, a)
	}
	return strings.Join(parts, " ")
}

// planned are the tables the projection reads by key, each through an index. projection_checkpoints
// (a row per projection) and River's tables are not the projection's to plan.
var planned = []string{"calendar_bookings", "calendar_slots", "calendar_resources", "process_steps", "bl_overlapping_claims"}

// stepsTrace collects, while on is set, the first three executions of each statement sent that names
// a table of planned, with their arguments, and the settings any statement sent set.
type stepsTrace struct {
	on  atomic.Bool
	mu  sync.Mutex
	got []probe
	sql map[string]int // statement → executions kept
	set []string       // the settings the projection's statements set, without LOCAL
}

func (tr *stepsTrace) add(sql string, args []any) {
	if !tr.on.Load() {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, part := range strings.Split(sql, ";") {
		f := strings.Fields(part)
		if len(f) < 2 || !strings.EqualFold(f[0], "set") {
			continue
		}
		if f = f[1:]; strings.EqualFold(f[0], "local") {
			f = f[1:]
		}
		if s := strings.Join(f, " "); !slices.Contains(tr.set, s) {
			tr.set = append(tr.set, s)
		}
	}
	if !namesAny(sql, planned) {
		return
	}
	if tr.sql == nil {
		tr.sql = map[string]int{}
	}
	// A few executions of each statement: their arguments differ (one booking, several, a chain).
	if tr.sql[sql] >= 3 {
		return
	}
	tr.sql[sql]++
	tr.got = append(tr.got, probe{sql: sql, args: append([]any(nil), args...)})
}

func namesAny(sql string, names []string) bool {
	for _, n := range names {
		if strings.Contains(sql, n) {
			return true
		}
	}
	return false
}

func (tr *stepsTrace) probes() []probe {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]probe(nil), tr.got...)
}

func (tr *stepsTrace) settings() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.set...)
}

func (tr *stepsTrace) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	tr.add(d.SQL, d.Args)
	return ctx
}
func (tr *stepsTrace) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (tr *stepsTrace) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (tr *stepsTrace) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	tr.add(d.SQL, d.Args)
}
func (tr *stepsTrace) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// planningConn connects to url, closed at the end of the test, and sets settings on the session, as
// the projection's transaction set them.
func planningConn(t *testing.T, url string, settings []string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	for _, s := range settings {
		_, err := conn.Exec(ctx, `SET `+s)
		require.NoError(t, err)
	}
	return conn
}

// explainProbe explains p's plan on conn with p's arguments: mode "custom" is the plan for those
// values, which a connection runs at its first five executions of a statement (EXPLAIN with the
// values bound); "kept" the plan it chooses at the sixth and keeps (PostgreSQL compares the generic
// plan with the custom plans so far: EXPLAIN EXECUTE of the prepared statement, six times). It returns
// the scans without an index condition and the plan's text.
func explainProbe(ctx context.Context, conn *pgx.Conn, leading map[string]string, name, mode string, p probe) ([]string, string, error) {
	var raw []byte
	kind := ""
	switch mode {
	case "custom":
		if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+p.sql, p.args...).Scan(&raw); err != nil {
			return nil, "", fmt.Errorf("explain: %w", err)
		}
	case "kept":
		lits, err := literals(ctx, conn, name, p)
		if err != nil {
			return nil, "", err
		}
		defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `DEALLOCATE `+name) }()
		for range 6 {
			if err := conn.QueryRow(ctx, `EXPLAIN (FORMAT JSON) EXECUTE `+name+`(`+strings.Join(lits, ", ")+`)`).Scan(&raw); err != nil {
				return nil, "", fmt.Errorf("explain: %w", err)
			}
		}
		var generic int64
		if err := conn.QueryRow(ctx, `SELECT generic_plans FROM pg_prepared_statements WHERE name = $1`, name).Scan(&generic); err != nil {
			return nil, "", fmt.Errorf("plan kind: %w", err)
		}
		kind = "(custom)\n"
		if generic > 0 {
			kind = "(generic)\n"
		}
	default:
		return nil, "", fmt.Errorf("unknown plan mode %q", mode)
	}
	var plan []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
		return nil, string(raw), fmt.Errorf("explain: %d plans, %v", len(plan), err)
	}
	var text strings.Builder
	text.WriteString(kind)
	plan[0].Plan.write(&text, 0)
	return plan[0].Plan.unindexed(leading), text.String(), nil
}

// literals prepares p's statement as name and returns its arguments as SQL literals of the types
// PostgreSQL inferred for its parameters, for EXECUTE.
func literals(ctx context.Context, conn *pgx.Conn, name string, p probe) ([]string, error) {
	if _, err := conn.Exec(ctx, `PREPARE `+name+` AS `+p.sql); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	var types []string
	if err := conn.QueryRow(ctx, `SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = $1`, name).Scan(&types); err != nil {
		return nil, fmt.Errorf("parameter types: %w", err)
	}
	if len(types) != len(p.args) {
		return nil, fmt.Errorf("%d parameters, %d arguments", len(types), len(p.args))
	}
	lits := make([]string, len(types))
	for i, typ := range types {
		if err := conn.QueryRow(ctx, `SELECT quote_nullable($1::`+typ+`)`, p.args[i]).Scan(&lits[i]); err != nil {
			return nil, fmt.Errorf("literal of $%d (%s): %w", i+1, typ, err)
		}
		lits[i] += "::" + typ
	}
	return lits, nil
}

// planNode is the part of EXPLAIN (FORMAT JSON) the test reads.
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	FunctionName string     `json:"Function Name"`
	IndexName    string     `json:"Index Name"`
	IndexCond    string     `json:"Index Cond"`
	RecheckCond  string     `json:"Recheck Cond"`
	Filter       string     `json:"Filter"`
	Plans        []planNode `json:"Plans"`
}

// leadingKeys returns the first key column (or expression) of every B-tree index of the database,
// by index name.
func leadingKeys(t *testing.T, conn *pgx.Conn) map[string]string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT c.relname, pg_get_indexdef(c.oid, 1, true)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
WHERE am.amname = 'btree' AND c.relnamespace = current_schema()::regnamespace`)
	require.NoError(t, err)
	out := map[string]string{}
	for rows.Next() {
		var name, key string
		require.NoError(t, rows.Scan(&name, &key))
		out[name] = key
	}
	require.NoError(t, rows.Err())
	return out
}

// unindexed lists the scans of the tables of planned that have no index condition: sequential scans,
// index scans that walk a whole index (no condition, or, on a B-tree, none on its leading key:
// calendar_slots_pkey (booking, resource_id) scanned by resource_id alone), and a call of
// bl_overlapping_claims PostgreSQL did not inline (its scans would be out of sight). A bitmap heap scan
// is as selective as the bitmap index scans under it, which are checked themselves. The calendar's
// rule (readmodel's plans_test.go), with the leading key. leading maps B-tree indexes to their first key.
func (p planNode) unindexed(leading map[string]string) []string {
	var out []string
	switch p.NodeType {
	case "Seq Scan":
		if namesAny(p.RelationName, planned) {
			out = append(out, "Seq Scan on "+p.RelationName)
		}
	case "Function Scan":
		if namesAny(p.FunctionName, planned) {
			out = append(out, "Function Scan of "+p.FunctionName+" (not inlined)")
		}
	case "Index Scan", "Index Only Scan", "Bitmap Index Scan":
		if !namesAny(p.IndexName, planned) {
			break
		}
		key, btree := leading[p.IndexName]
		switch {
		case p.IndexCond == "":
			out = append(out, p.NodeType+" without a condition on "+p.IndexName)
		case btree && !mentions(p.IndexCond, key):
			out = append(out, p.NodeType+" of "+p.IndexName+" without a condition on its leading key "+key+": "+p.IndexCond)
		}
		// The claims' start index answers an overlap within its look-back only: by resource alone it
		// reads every claim of the resource and filters them.
		if p.IndexName == "calendar_slots_start_idx" && strings.Contains(p.Filter, "&&") && !strings.Contains(p.IndexCond, "lower(during) >=") {
			out = append(out, p.NodeType+" of "+p.IndexName+" filtering overlaps without a bounded start: "+p.IndexCond)
		}
	}
	for _, c := range p.Plans {
		out = append(out, c.unindexed(leading)...)
	}
	return out
}

// mentions reports whether an index condition names key as a column of the scanned table (not as an
// outer one's, b.booking).
func mentions(cond, key string) bool {
	return regexp.MustCompile(`(^|[^.\w])` + regexp.QuoteMeta(key)).MatchString(cond)
}

// write prints the plan as an indented tree of its nodes and conditions, for failure messages.
func (p planNode) write(b *strings.Builder, depth int) {
	b.WriteString(strings.Repeat("  ", depth) + "-> " + p.NodeType)
	for _, s := range []struct{ label, v string }{{" on ", p.RelationName}, {" of ", p.FunctionName}, {" using ", p.IndexName},
		{"  Index Cond: ", p.IndexCond}, {"  Recheck Cond: ", p.RecheckCond}, {"  Filter: ", p.Filter}} {
		if s.v != "" {
			b.WriteString(s.label + s.v)
		}
	}
	b.WriteString("\n")
	for _, c := range p.Plans {
		c.write(b, depth+1)
	}
}
