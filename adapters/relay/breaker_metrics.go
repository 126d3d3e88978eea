package relay

import (
	"bookingledger/adapters/postgres/relaystore"
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// breakerCollector reports each endpoint's breaker, backlog age and held deliveries at scrape time,
// from the database: every serve process reports the same figures.
type breakerCollector struct {
	store           *relaystore.Store
	open, age, held *prometheus.Desc
	scrapeTimeout   time.Duration
}

func newBreakerCollector(pool *pgxpool.Pool) *breakerCollector {
	return &breakerCollector{store: relaystore.New(pool), scrapeTimeout: 2 * time.Second,
		open: prometheus.NewDesc("bookingledger_relay_breaker_open",
			"1 while the endpoint's circuit breaker is open (one probe at a time, the rest held), 0 otherwise.", []string{"endpoint"}, nil),
		age: prometheus.NewDesc("bookingledger_relay_backlog_age_seconds",
			"Age of the endpoint's oldest pending delivery (0: none pending).", []string{"endpoint"}, nil),
		held: prometheus.NewDesc("bookingledger_relay_deliveries_held",
			"Pending deliveries held without a job, by endpoint and reason (order: an earlier version first; breaker: the breaker is open).",
			[]string{"endpoint", "reason"}, nil)}
}

func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.open
	ch <- c.age
	ch <- c.held
}

func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.scrapeTimeout)
	defer cancel()
	gs, err := c.store.BreakerGauges(ctx)
	if err != nil {
		return // a scrape during a database outage shows no relay gauges rather than failing
	}
	for _, g := range gs {
		ep := strconv.FormatInt(g.Endpoint, 10)
		v := 0.0
		if g.Open {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, v, ep)
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, g.AgeSeconds, ep)
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(g.ByOrder), ep, heldOrder)
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(g.ByBreaker), ep, heldBreaker)
	}
}
