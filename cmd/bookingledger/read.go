package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/adapters/esdb"
	"bookingledger/adapters/eventcodec"
	"bookingledger/adapters/httpapi/readapi"
	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/adapters/privacy"
	"bookingledger/domain/booking"
	"bookingledger/domain/eventlog"
	"bookingledger/projections"
	"bookingledger/projections/calendar"
	"bookingledger/projections/history"
)

// The read-side subcommands (history, calendar, reconcile, rebuild) work on the read model that serve
// keeps up to date, in the same database, over the same event store; they never migrate.

// storeFlags are the flags every command that reads the ledger shares with serve.
type storeFlags struct {
	databaseURL *string
	eventStore  *string
	masterKey   *string
}

// storeUse is what of the store a command uses beyond the database, and so which of the store's
// flags it shows: a flag a command never reads would only mislead.
type storeUse int

const (
	// usesEvents: the command reads or appends events (-event-store).
	usesEvents storeUse = 1 << iota
	// usesBodies: the command shows receipt bodies (-master-key).
	usesBodies
)

// registerStoreFlags registers -database-url and the store flags of uses; none given means all of them.
// A command without -event-store works on PostgreSQL's tables only and never reads an event.
func registerStoreFlags(f *envFlags, uses ...storeUse) storeFlags {
	use := usesEvents | usesBodies
	if len(uses) > 0 {
		use = 0
		for _, u := range uses {
			use |= u
		}
	}
	sf := storeFlags{
		databaseURL: f.Secret("database-url", []string{envDatabaseURL, envDatabaseURLFallback}, "PostgreSQL URL"),
		eventStore:  new(string),
		masterKey:   new(string),
	}
	*sf.eventStore = "postgres"
	if use&usesEvents != 0 {
		sf.eventStore = f.String("event-store", []string{envEventStore}, "postgres", `event store: "postgres" or an esdb:// / esdb+discover:// URL`)
	}
	if use&usesBodies != 0 {
		sf.masterKey = f.Secret("master-key", []string{privacy.EnvMasterKey}, "master keys that open the receipt bodies (id:base64,…; without them bodies show as sealed)")
	}
	return sf
}

// storeNone is a command's store use when it needs the database alone.
const storeNone storeUse = 0

func (s storeFlags) check() error {
	if *s.databaseURL == "" {
		return errNoDatabaseURL()
	}
	return checkEventStore(*s.eventStore)
}

// eventStore is the event store selected by BOOKINGLEDGER_EVENT_STORE, with the PostgreSQL receipts
// that live next to the read models whichever store holds the events.
type eventStore struct {
	events eventlog.Store
	// subscriber is the same store's subscription, which the projections follow once caught up.
	subscriber eventlog.Subscriber
	receipts   *postgres.Store
	// esdb is set when the events live in EventStoreDB.
	esdb *esdb.Store
}

func openEventStore(ctx context.Context, setting string, pool *pgxpool.Pool, log *slog.Logger) (eventStore, error) {
	receipts := postgres.NewStore(pool)
	if !isESDB(setting) {
		return eventStore{events: receipts, subscriber: receipts, receipts: receipts}, nil
	}
	es, err := esdb.Open(ctx, setting, esdb.WithLogger(log))
	if err != nil {
		return eventStore{}, fmt.Errorf("open event store (%s): %w", envEventStore, err)
	}
	return eventStore{events: es, subscriber: es, receipts: receipts, esdb: es}, nil
}

func (s eventStore) Close() {
	if s.esdb != nil {
		s.esdb.Close()
	}
}

// readSide is the read model a CLI command queries, and what it must close.
type readSide struct {
	rm    *readmodel.ReadModel
	pool  *pgxpool.Pool
	store eventStore
	// phases are the calendar rebuild's phases and their durations, as rebuild prints them.
	phases []string
}

// openReadSide checks the store flags, then opens the database and the event store. It refuses a
// database with pending migrations: the read models' tables may not be there yet, and only migrate (or
// serve) may change the schema.
func openReadSide(ctx context.Context, sf storeFlags, stderr io.Writer) (*readSide, error) {
	if err := sf.check(); err != nil {
		return nil, err
	}
	pool, err := openMigratedPool(ctx, *sf.databaseURL)
	if err != nil {
		return nil, err
	}
	// Commands print results on stdout; only the event store client's warnings go to stderr.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := openEventStore(ctx, *sf.eventStore, pool, log)
	if err != nil {
		pool.Close()
		return nil, err
	}
	if err := sealReceipts(ctx, pool, store.receipts, *sf.masterKey); err != nil {
		store.Close()
		pool.Close()
		return nil, err
	}
	rs := &readSide{pool: pool, store: store}
	rs.rm = readmodel.New(pool, store.events, eventcodec.JSON{}, readmodel.Options{Receipts: store.receipts, Steps: stepstore.NewStore(pool, nil),
		Links: eventcodec.JSON{}, Texts: privacy.NewTexts(pool), Phases: func(phase string, took time.Duration) {
			rs.phases = append(rs.phases, fmt.Sprintf("%s %.1fs", phase, took.Seconds()))
		}})
	return rs, nil
}

func (r *readSide) deps() projectionDeps {
	return projectionDeps{pool: r.pool, events: r.store, calendar: r.rm}
}

func (r *readSide) Close() {
	r.store.Close()
	r.pool.Close()
}

func writeJSONTo(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

const historyUsage = `Usage: bookingledger history <booking> [--json] [flags]

Prints a booking as an auditor reads it: its current calendar state; every delivery receipt that named
it (duplicates and quarantined deliveries included) with the secret that verified it; its events in
arrival order next to the order the fold applied them; and the findings, each with its reason (a
duplicate delivery, an event that arrived out of order, a create refused after the cancel, a slot
conflict). <booking> is the bookingledger booking ID, with its provider's prefix: calendly-<invitee>,
calcom-<uid>, acuity-<id>, standard-<id>, stripe-<payment intent>. --json prints the document
GET /api/bookings/{booking}/history answers.`

func runHistory(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newEnvFlags("history", getenv, stderr, historyUsage)
	sf := registerStoreFlags(f, usesEvents)
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print JSON (the HTTP API's shape) instead of the timeline")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("history wants one booking ID, got %q", pos)
	}
	id := booking.ID(pos[0])
	if err := id.Validate(); err != nil {
		return usageErrorf("history: %w", err)
	}
	rs, err := openReadSide(ctx, sf, stderr)
	if err != nil {
		return err
	}
	defer rs.Close()
	h, err := rs.rm.History(ctx, id)
	switch {
	case errors.Is(err, projections.ErrNotFound):
		return fmt.Errorf("history: no event, receipt or calendar row names booking %q (booking IDs carry the provider's prefix, e.g. calendly-<invitee id>): %w", id, err)
	case err != nil:
		return fmt.Errorf("history: %w", err)
	}
	if *asJSON {
		return readapi.WriteHistoryJSON(stdout, h)
	}
	if err := history.WriteTimeline(stdout, h); err != nil {
		return err
	}
	return writeBookingDeliveries(ctx, rs.pool, id, stdout)
}

const calendarUsage = `Usage: bookingledger calendar --from RFC3339 --to RFC3339 [--resource R] [--limit N] [--cursor C] [--json] [flags]

Prints the calendar read model: one line per booking and resource whose slot overlaps [from, to), of
every status (active, conflict, canceled, …), ordered by start. The window is at most 366 days.
--resource limits it to one host calendar (e.g. https://api.calendly.com/users/<host>). It prints one
page of at most --limit entries; when more follow it says so on stderr with the --cursor that prints
the next page (--json: has_more and next_cursor). --json prints the document GET /api/calendar answers.`

func runCalendar(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newEnvFlags("calendar", getenv, stderr, calendarUsage)
	sf := registerStoreFlags(f, storeNone)
	from := f.String("from", []string{"BOOKINGLEDGER_CALENDAR_FROM"}, "", "window start, RFC 3339 (required)")
	to := f.String("to", []string{"BOOKINGLEDGER_CALENDAR_TO"}, "", "window end, RFC 3339, exclusive (required)")
	resource := f.String("resource", []string{"BOOKINGLEDGER_CALENDAR_RESOURCE"}, "", "only this resource (host calendar)")
	limit := f.Int64("limit", []string{"BOOKINGLEDGER_CALENDAR_LIMIT"}, calendar.DefaultCalendarPage, 1, "entries per page (at most 10000)")
	cursor := f.String("cursor", []string{"BOOKINGLEDGER_CALENDAR_CURSOR"}, "", "print the page after this cursor (from the previous page)")
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print JSON (the HTTP API's shape) instead of a table")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("calendar takes no arguments, got %q (use --from and --to)", pos)
	}
	var q calendar.CalendarQuery
	for _, t := range []struct {
		name, value string
		into        *time.Time
	}{{"--from", *from, &q.From}, {"--to", *to, &q.To}} {
		if t.value == "" {
			return usageErrorf("calendar: %s is required (an RFC 3339 time, e.g. 2030-01-07T00:00:00Z)", t.name)
		}
		if *t.into, err = time.Parse(time.RFC3339Nano, t.value); err != nil {
			return usageErrorf("calendar: %s %q is not an RFC 3339 time (e.g. 2030-01-07T00:00:00Z)", t.name, t.value)
		}
	}
	q.Resource = *resource
	if *limit > calendar.MaxCalendarPage {
		return usageErrorf("calendar: --limit %d: at most %d", *limit, calendar.MaxCalendarPage)
	}
	q.Limit = int(*limit)
	if *cursor != "" {
		c, err := calendar.ParseCalendarCursor(*cursor)
		if err != nil {
			return usageErrorf("calendar: --cursor: %w", err)
		}
		q.After = &c
	}
	if err := q.Validate(); err != nil {
		return usageErrorf("calendar: %w", err)
	}
	rs, err := openReadSide(ctx, sf, stderr)
	if err != nil {
		return err
	}
	defer rs.Close()
	page, err := rs.rm.Calendar(ctx, q)
	if err != nil {
		return fmt.Errorf("calendar: %w", err)
	}
	if *asJSON {
		return writeJSONTo(stdout, readapi.ToCalendar(page))
	}
	if err := calendar.WriteCalendar(stdout, page.Entries); err != nil {
		return err
	}
	if next := page.Next(); next != nil {
		fmt.Fprintf(stderr, "calendar: more entries follow this page of %d; the next page: --cursor %s\n", len(page.Entries), next)
	}
	return nil
}

const reconcileUsage = `Usage: bookingledger reconcile list [--json] [flags]
       bookingledger reconcile resolve <id> --note "…" [--action mark-done|retry|skip] [--by WHO] [--json] [flags]

list prints the open reconciliation items, oldest first: bookings in conflict with the slot's holder,
events kept but refused (a create after its cancel), quarantined deliveries. resolve closes an open
item with an operator's note; an item an operator closed is never reopened for the same cause.
--json prints what GET /api/reconciliation (list) or POST /api/reconciliation/{id}/resolve answers.`

func runReconcile(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newEnvFlags("reconcile", getenv, stderr, reconcileUsage)
	sf := registerStoreFlags(f, storeNone)
	note := f.String("note", []string{"BOOKINGLEDGER_RESOLVE_NOTE"}, "", "resolve: why the item is closed (required, at most 4000 bytes)")
	action := f.String("action", []string{"BOOKINGLEDGER_RESOLVE_ACTION"}, "", "resolve a process step's item: mark-done, retry or skip (required for step items, refused for others)")
	by := f.String("by", []string{"BOOKINGLEDGER_OPERATOR"}, cliOperator(getenv), "resolve: who resolves it, recorded with the item")
	asJSON := f.Bool("json", []string{"BOOKINGLEDGER_JSON"}, "print JSON (the HTTP API's shape)")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageErrorf("reconcile wants an action: list, or resolve <id> --note \"…\"")
	}
	var id int64
	switch pos[0] {
	case "list":
		if len(pos) > 1 {
			return usageErrorf("reconcile list takes no arguments, got %q", pos[1:])
		}
		if err := onlyFor(f, "reconcile list", "resolve", "note", "action", "by"); err != nil {
			return err
		}
	case "resolve":
		if len(pos) != 2 {
			return usageErrorf("reconcile resolve wants one item id, got %q", pos[1:])
		}
		if id, err = strconv.ParseInt(pos[1], 10, 64); err != nil || id <= 0 {
			return usageErrorf("reconcile resolve: item id %q is not a positive integer (see 'bookingledger reconcile list')", pos[1])
		}
		if strings.TrimSpace(*note) == "" {
			return usageErrorf("reconcile resolve: --note is required (say why the item is closed)")
		}
		if len(strings.TrimSpace(*note)) > readmodel.MaxNoteLength {
			return usageErrorf("reconcile resolve: --note is longer than %d bytes", readmodel.MaxNoteLength)
		}
		if *action != "" && !slices.Contains(stepstore.Actions, stepstore.Action(*action)) {
			return usageErrorf("reconcile resolve: unknown --action %q (want %s)", *action, actionNames())
		}
	default:
		return usageErrorf("reconcile: unknown action %q (want list or resolve)", pos[0])
	}
	rs, err := openReadSide(ctx, sf, stderr)
	if err != nil {
		return err
	}
	defer rs.Close()

	if pos[0] == "list" {
		items, err := rs.rm.OpenItems(ctx)
		if err != nil {
			return fmt.Errorf("reconcile list: %w", err)
		}
		if *asJSON {
			out := readapi.ItemsDTO{Items: make([]readapi.ItemDTO, len(items))}
			for i, it := range items {
				out.Items[i] = readapi.ToItem(it)
			}
			return writeJSONTo(stdout, out)
		}
		if err := calendar.WriteItems(stdout, items); err != nil {
			return err
		}
		// Deliveries that never became events are receipts, not items: say where they are.
		_, err = fmt.Fprintln(stdout, "\nquarantined and deferred deliveries: bookingledger receipts list --outcome quarantined (or deferred); receipts show <id>")
		return err
	}

	if *action != "" {
		return resolveStep(ctx, rs, id, *action, *note, *by, *asJSON, stdout)
	}
	it, err := rs.rm.Resolve(ctx, id, *note, *by)
	if err != nil {
		return resolveError(id, err)
	}
	if *asJSON {
		return writeJSONTo(stdout, readapi.ToItem(it))
	}
	subject := string(it.Booking)
	if it.OtherBooking != "" {
		subject += " vs " + string(it.OtherBooking)
	}
	if subject == "" && it.ReceiptID != 0 {
		subject = fmt.Sprintf("receipt #%d", it.ReceiptID)
	}
	_, err = fmt.Fprintf(stdout, "closed item %d (%s: %s) at %s by %s\n  reason: %s\n  note:   %s\n",
		it.ID, it.Kind, subject, it.ClosedAt.UTC().Format(time.RFC3339), it.ResolvedBy, it.Reason, it.Note)
	return err
}

// resolveError says what a failed resolution of item id means to the operator.
func resolveError(id int64, err error) error {
	switch {
	case errors.Is(err, projections.ErrNotFound):
		return fmt.Errorf("reconcile resolve: there is no reconciliation item %d (see 'bookingledger reconcile list'): %w", id, err)
	case errors.Is(err, projections.ErrItemClosed):
		return fmt.Errorf("reconcile resolve: item %d is closed already; nothing changed: %w", id, err)
	case errors.Is(err, projections.ErrInvalidQuery):
		return usageError{fmt.Errorf("reconcile resolve: %w", err)}
	default:
		return fmt.Errorf("reconcile resolve: %w", err)
	}
}

// cliOperator is who a resolution from the command line is recorded as by default: the OS user.
func cliOperator(getenv func(string) string) string {
	if u := strings.TrimSpace(getenv("USER")); u != "" {
		return "cli:" + u
	}
	return "cli"
}

// isSet reports whether the flag was given on the command line.
// onlyFor refuses, as a usage error of cmd, the first of names set on f: those flags apply to owner
// only, and a command must not run while ignoring what it was told.
func onlyFor(f *envFlags, cmd, owner string, names ...string) error {
	for _, name := range names {
		if isSet(f, name) {
			return usageErrorf("%s: --%s applies to %s only", cmd, name, owner)
		}
	}
	return nil
}

func isSet(f *envFlags, name string) bool {
	set := false
	f.fs.Visit(func(fl *flag.Flag) {
		if fl.Name == name {
			set = true
		}
	})
	return set
}

const rebuildUsage = `Usage: bookingledger rebuild [calendar|process|relay|all] [--quiet] [flags]

Empties the named projection's read model and replays the whole event log into it; the other
projections are left alone ("all": every one, in the order serve runs them). The default is "calendar" (the calendar, payment links and
reconciliation queue, which is synced once at the end: operators' resolutions are kept). "process"
re-plans every booking's process steps from the calendar: existing steps are found by their keys, so
nothing is sent again (targets are read from the same environment as serve's). An unknown name is
refused with the list of the projections serve runs.

Stop every 'bookingledger serve' on this database first: the serve that runs the projection holds its
lock, and rebuild refuses to start while it does. A serve started during the rebuild waits as a
standby. An interrupted rebuild (Ctrl-C) leaves the read model partly rebuilt; the next serve or
rebuild finishes it. Progress goes to stderr (--quiet: none), the result to stdout: per projection
the events applied, the wall time and their quotient, the rate.`

func runRebuild(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	f := newEnvFlags("rebuild", getenv, stderr, rebuildUsage)
	sf := registerStoreFlags(f, usesEvents)
	quiet := f.Bool("quiet", []string{"BOOKINGLEDGER_QUIET"}, "print no progress")
	pos, err := f.parse(args)
	if err != nil {
		return err
	}
	name := readmodel.ProjectionName
	switch len(pos) {
	case 0:
	case 1:
		name = pos[0]
	default:
		return usageErrorf("rebuild takes at most one projection name, got %q", pos)
	}
	entries := projectionRegistry()
	if name != rebuildAll {
		entry, err := lookupProjection(entries, name)
		if err != nil {
			return err
		}
		entries = []projectionEntry{entry}
	}
	rs, err := openReadSide(ctx, sf, stderr)
	if err != nil {
		return err
	}
	defer rs.Close()
	deps, err := withSteps(rs.deps(), getenv)
	if err != nil {
		return err
	}
	// A rebuild's heap is mostly a few chunks of decoded bookings (under 100 MB live at 1,000,000
	// events), garbage once each chunk is written: collecting a third as often saves about a sixth of
	// the process's CPU, and the soft limit keeps the peak under the 400 MB a rebuild may take
	// whatever the log's size (docs/benchmarks.md). An operator's GOGC or GOMEMLIMIT wins.
	if getenv("GOGC") == "" && getenv("GOMEMLIMIT") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(300))
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(300 << 20))
	}
	for _, entry := range entries {
		if err := rebuildProjection(ctx, deps, entry, *quiet, stdout, stderr); err != nil {
			return err
		}
		if len(rs.phases) > 0 {
			// Where the write's time went (the rest of the wall time is reading the log into the replay).
			fmt.Fprintf(stdout, "phases: %s\n", strings.Join(rs.phases, ", "))
			rs.phases = nil
		}
	}
	return nil
}

// rebuildAll names every projection to rebuild.
const rebuildAll = "all"

// rebuildProjection rebuilds e's projection and prints the result.
func rebuildProjection(ctx context.Context, d projectionDeps, e projectionEntry, quiet bool, stdout, stderr io.Writer) error {
	name := e.name
	runner, err := d.runner(e, projections.RunnerOptions{BatchSize: e.rebuildBatch})
	if err != nil {
		return err
	}
	var progress func(projections.Progress)
	var bar *progressBar
	if !quiet {
		bar = newProgressBar(stderr, "rebuild "+name)
		if e.bulk != nil {
			// Only a bulk load (the calendar's) has work left once the replay reached the total.
			bar.afterReplay = "writing the read model and syncing the reconciliation queue"
		}
		progress = bar.update
	}
	start := time.Now()
	err = runner.Rebuild(ctx, progress)
	if bar != nil {
		bar.finish()
	}
	switch {
	case errors.Is(err, projections.ErrBusy):
		return fmt.Errorf("rebuild %s: a running 'bookingledger serve' holds the projection's lock on this database; "+
			"stop every serve process first, then run rebuild again: %w", name, err)
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("rebuild %s interrupted: the read model is partly rebuilt; the next serve or rebuild finishes it: %w", name, err)
	case err != nil:
		return fmt.Errorf("rebuild %s: %w", name, err)
	}
	elapsed := time.Since(start)
	cp, err := checkpoint.Read(ctx, d.pool, name)
	if err != nil {
		return fmt.Errorf("rebuild %s: done, but reading its checkpoint failed: %w", name, err)
	}
	rate := float64(cp.EventsApplied) / max(elapsed.Seconds(), 1e-9)
	_, err = fmt.Fprintf(stdout, "rebuilt %s: %d events in %s (%.0f events/s), checkpoint %s\n",
		name, cp.EventsApplied, elapsed.Round(time.Millisecond), rate, cp.Position)
	return err
}
