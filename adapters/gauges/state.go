package gauges

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"bookingledger/adapters/jobs"
	"bookingledger/adapters/postgres/checkpoint"
	"bookingledger/domain/eventlog"
	"bookingledger/projections/calendar"
	"bookingledger/projections/steps"
)

// Bounds of the database gauges' queries, which run at every scrape.
const (
	stateTimeout = 3 * time.Second
	// maxEventsBehind caps the count of events a projection has yet to apply: past it the number only
	// says "far behind", and the scan stays bounded.
	maxEventsBehind = 1_000_000
)

// Sources are what the database gauges read. Pool holds the job queue's tables (the backlog) and the
// projections' checkpoints; the other counts come from the stores that own their tables.
type Sources struct {
	Pool *pgxpool.Pool
	// Projections are the projections whose lag is reported; a projection without a checkpoint row
	// yet is at the start of the log.
	Projections []string
	// OpenItems counts the open reconciliation items by kind (the read model's OpenItemCounts).
	OpenItems func(ctx context.Context) (map[calendar.ItemKind]int64, error)
	// Quarantined counts the quarantined receipts (the PostgreSQL store's CountQuarantined).
	Quarantined func(ctx context.Context) (int64, error)
	// Steps counts the process steps by kind and state (the step store's Counts); every kind and
	// state is reported, 0 where there is none.
	Steps func(ctx context.Context) (map[steps.Kind]map[steps.State]int64, error)
	// EventsAfter counts the log's events after a position, up to a limit; nil when the event store
	// cannot count cheaply (EventStoreDB), and the events-behind gauge is left out.
	EventsAfter func(ctx context.Context, pos eventlog.Position, limit int64) (int64, error)
	Log         *slog.Logger
}

// StateCollector exports what the shared database holds — the reconciliation queue, quarantined
// receipts, the job backlog and each projection's lag — read when Prometheus scrapes. Every instance
// reports the same values (the database is shared); alert rules take max() over instances.
type StateCollector struct {
	src                                            Sources
	openItems, quarantined, backlog, behind, moved *prometheus.Desc
	steps, ok                                      *prometheus.Desc
}

// NewStateCollector returns the collector of the database gauges; register it once per registry.
func NewStateCollector(src Sources) *StateCollector {
	return &StateCollector{
		src: src,
		openItems: prometheus.NewDesc("bookingledger_reconciliation_open_items",
			"Open reconciliation items, by kind (conflict, quarantined, late_event, step, sync).", []string{"kind"}, nil),
		quarantined: prometheus.NewDesc("bookingledger_receipts_quarantined",
			"Stored receipts of verified deliveries that could not be mapped (kept for operators).", nil, nil),
		backlog: prometheus.NewDesc("bookingledger_jobs_backlog",
			"Background jobs not finished yet (waiting, running or waiting to retry), by River queue; queue \"deferred\" holds the deferred deliveries.",
			[]string{"queue"}, nil),
		behind: prometheus.NewDesc("bookingledger_projection_events_behind",
			"Events in the log after the projection's saved checkpoint (counted up to 1,000,000).", []string{"projection"}, nil),
		moved: prometheus.NewDesc("bookingledger_projection_checkpoint_timestamp_seconds",
			"Unix time the projection's checkpoint last moved, by whichever instance applied it (0: never).", []string{"projection"}, nil),
		steps: prometheus.NewDesc("bookingledger_process_steps",
			"Process steps by kind and state (all instances; read from the database on scrape).", []string{"kind", "state"}, nil),
		ok: prometheus.NewDesc("bookingledger_state_scrape_ok",
			"1 when every query behind the database gauges succeeded at this scrape, 0 otherwise.", nil, nil),
	}
}

func (c *StateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.openItems, c.quarantined, c.backlog, c.behind, c.moved, c.steps, c.ok} {
		ch <- d
	}
}

func (c *StateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	failed := false
	fail := func(what string, err error) {
		failed = true
		c.src.Log.Warn("metrics: database gauge not read", "gauge", what, "error", err.Error())
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}

	if items, err := c.src.OpenItems(ctx); err != nil {
		fail("open items", err)
	} else {
		for kind, n := range items {
			gauge(c.openItems, float64(n), string(kind))
		}
	}
	if n, err := c.src.Quarantined(ctx); err != nil {
		fail("quarantined receipts", err)
	} else {
		gauge(c.quarantined, float64(n))
	}
	if counts, err := c.src.Steps(ctx); err != nil {
		fail("process steps", err)
	} else {
		for _, k := range steps.Kinds {
			for _, st := range steps.States {
				gauge(c.steps, float64(counts[k][st]), string(k), string(st))
			}
		}
	}
	if backlog, err := jobs.Backlog(ctx, c.src.Pool, jobs.QueueDeferred); err != nil {
		fail("job backlog", err)
	} else {
		for queue, n := range backlog {
			gauge(c.backlog, float64(n), queue)
		}
	}
	for _, name := range c.src.Projections {
		cp, err := checkpoint.Read(ctx, c.src.Pool, name) // never ran: the start of the log, never moved
		if err != nil {
			fail("checkpoint", err)
			continue
		}
		var moved float64
		if !cp.UpdatedAt.IsZero() {
			moved = float64(cp.UpdatedAt.UnixNano()) / 1e9
		}
		gauge(c.moved, moved, name)
		if c.src.EventsAfter == nil {
			continue
		}
		if n, err := c.src.EventsAfter(ctx, cp.Position, maxEventsBehind); err != nil {
			fail("events behind", err)
		} else {
			gauge(c.behind, float64(n), name)
		}
	}
	ok := 1.0
	if failed {
		ok = 0
	}
	gauge(c.ok, ok)
}
