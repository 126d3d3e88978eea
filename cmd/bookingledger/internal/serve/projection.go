package serve

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"bookingledger/adapters/eventcodec"
	"bookingledger/cmd/bookingledger/internal/cmdline"
	"bookingledger/cmd/bookingledger/internal/ledgerdb"
	"bookingledger/cmd/bookingledger/internal/stepscmd"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/adapters/postgres/readmodel"
	"bookingledger/adapters/postgres/stepstore"
	"bookingledger/adapters/process"
	"bookingledger/adapters/relay"
	"bookingledger/projections"
)

// projectionDeps is what the projections are built from: the database their tables, checkpoints and
// locks live in, the event store they follow, and the calendar read model the read API also queries.
type projectionDeps struct {
	pool     *pgxpool.Pool
	events   ledgerdb.EventStore
	calendar *readmodel.ReadModel
	// jobs inserts the process steps' jobs; stepTargets are the configured step targets.
	jobs        *river.Client[pgx.Tx]
	stepTargets process.Targets
	log         *slog.Logger
	// relay is serve's relay; commands that only rebuild get one on pool.
	relay *relay.Relay
}

// projectionEntry is a projection serve runs and rebuild names.
type projectionEntry struct {
	name string
	// rebuildBatch is the batch a rebuild reads and applies at once (0: the runner's default).
	rebuildBatch int
	build        func(d projectionDeps) (projections.Projection, error)
	// bulk, when set, is the projection's bulk load of replays from the start of the log.
	bulk func(d projectionDeps) projections.Bulk
}

// projectionRegistry lists every projection, in the order serve starts them. A new projection is one
// more entry.
func projectionRegistry() []projectionEntry {
	return []projectionEntry{{
		name:         readmodel.ProjectionName,
		rebuildBatch: readmodel.RebuildBatchSize,
		build:        func(d projectionDeps) (projections.Projection, error) { return d.calendar, nil },
		bulk:         func(d projectionDeps) projections.Bulk { return d.calendar },
	}, {
		// After the calendar: it plans from the calendar's rows and never runs ahead of it.
		name: stepstore.ProjectionName,
		build: func(d projectionDeps) (projections.Projection, error) {
			var advanced func() <-chan struct{} // the calendar this process runs, when it holds its lock
			if d.calendar != nil {
				advanced = d.calendar.Advanced
			}
			return stepstore.NewProjection(stepstore.ProjectionConfig{Pool: d.pool, Calendar: readmodel.NewStepReader(d.pool), Client: d.jobs,
				Targets: d.stepTargets, Logger: d.log, CalendarAdvanced: advanced})
		},
	}, {
		// A rebuild of the relay re-plans every event and finds each delivery planned already: it never
		// sends anything twice.
		name: relay.ProjectionName,
		build: func(d projectionDeps) (projections.Projection, error) {
			rl := d.relay
			if rl == nil {
				var err error
				// Filters fold the events' streams: the relay reads the event store.
				if rl, err = relay.New(relay.Config{Pool: d.pool, Events: d.events.Events, Codec: eventcodec.JSON{}}); err != nil {
					return nil, err
				}
			}
			return rl.Projection()
		},
	}}
}

// lookupProjection finds name in the registry, or says which names there are.
func lookupProjection(registry []projectionEntry, name string) (projectionEntry, error) {
	names := make([]string, len(registry))
	for i, e := range registry {
		if e.name == name {
			return e, nil
		}
		names[i] = e.name
	}
	return projectionEntry{}, cmdline.UsageErrorf("rebuild: unknown projection %q (have %s, or all)", name, strings.Join(names, ", "))
}

// runner builds e's projection on its runner over the event store (following its subscription once
// caught up), elected by the database's advisory locks.
func (d projectionDeps) runner(e projectionEntry, opts projections.RunnerOptions) (*projections.Runner, error) {
	p, err := e.build(d)
	if err != nil {
		return nil, fmt.Errorf("projection %s: %w", e.name, err)
	}
	if p.Name() != e.name {
		return nil, fmt.Errorf("projection %s is registered as %s", p.Name(), e.name)
	}
	opts.Subscriber = d.events.Subscriber
	if e.bulk != nil {
		opts.Bulk = e.bulk(d)
	}
	return projections.NewRunner(d.events.Events, p, checkpoint.NewLocker(d.pool), opts), nil
}

// startRunners runs every registered projection in the background (startRunner) and returns them
// with the function that stops them all.
func startRunners(ctx context.Context, d projectionDeps, registry []projectionEntry, log *slog.Logger) ([]*projections.Runner, func(), error) {
	var (
		runners []*projections.Runner
		stops   []func()
	)
	stopAll := func() {
		for _, stop := range stops {
			stop()
		}
	}
	for _, e := range registry {
		r, err := d.runner(e, projections.RunnerOptions{Logger: log})
		if err != nil {
			stopAll()
			return nil, nil, err
		}
		runners = append(runners, r)
		stops = append(stops, startRunner(ctx, r, log))
	}
	return runners, stopAll, nil
}

// startRunner runs the projection in the background and returns the function that stops it and waits
// for it. The runner gets the server's context values but not its cancellation: it must keep
// applying while in-flight requests drain (their deliveries are committed and should become visible),
// and stop before the pool its lock and checkpoint live on is closed.
func startRunner(ctx context.Context, runner *projections.Runner, log *slog.Logger) (stop func()) {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = runner.Run(runCtx) // returns only when runCtx ends; failures are retried and logged inside
	}()
	return func() {
		cancel()
		<-done
		st := runner.Status()
		log.Info("projection stopped", "projection", st.Projection, "position", st.Position.String(), "applied", st.Applied)
	}
}

// projectionCollector exports the runners' status as metrics, one series per projection. The runner's health is not part of
// /readyz on purpose: readiness gates webhook traffic, which does not depend on the projection (a
// lagging or failing projection delays reads, never acknowledgements), and a standby runner — another
// serve process holds the projection's lock — is the normal state of every instance but one.
type projectionCollector struct {
	runners                   []*projections.Runner
	active, applied, lastSeen *prometheus.Desc
}

func newProjectionCollector(r []*projections.Runner) *projectionCollector {
	labels := []string{"projection"}
	return &projectionCollector{
		runners: r,
		active: prometheus.NewDesc("bookingledger_projection_active",
			"1 while this process holds the projection's lock and applies events; 0 on a standby.", labels, nil),
		applied: prometheus.NewDesc("bookingledger_projection_events_applied_total",
			"Events this process applied to the projection.", labels, nil),
		lastSeen: prometheus.NewDesc("bookingledger_projection_last_apply_timestamp_seconds",
			"Unix time of this process's last applied batch (0: none yet).", labels, nil),
	}
}

func (c *projectionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.active
	ch <- c.applied
	ch <- c.lastSeen
}

func (c *projectionCollector) Collect(ch chan<- prometheus.Metric) {
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	for _, r := range c.runners {
		st := r.Status()
		var last float64
		if !st.LastApply.IsZero() {
			last = float64(st.LastApply.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, b2f(st.Active), st.Projection)
		ch <- prometheus.MustNewConstMetric(c.applied, prometheus.CounterValue, float64(st.Applied), st.Projection)
		ch <- prometheus.MustNewConstMetric(c.lastSeen, prometheus.GaugeValue, last, st.Projection)
	}
}

// withSteps adds what the process projection needs outside serve (rebuild): an insert-only job
// client and the targets configured in the environment, as serve would read them.
func withSteps(d projectionDeps, getenv func(string) string) (projectionDeps, error) {
	sc, err := stepscmd.Parse(getenv)
	if err != nil {
		return d, err
	}
	if d.jobs, err = stepstore.InsertOnlyClient(d.pool); err != nil {
		return d, err
	}
	d.stepTargets = process.Targets{Calendar: sc.HasCalendar(), Email: sc.Mailer != nil}
	return d, nil
}

// readSideDeps are the projections' dependencies over a command's read side.
func readSideDeps(r *ledgerdb.ReadSide) projectionDeps {
	return projectionDeps{pool: r.Pool, events: r.Store, calendar: r.RM}
}
