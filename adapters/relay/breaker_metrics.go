package relay

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// breakerCollector reports each endpoint's breaker, backlog age and held deliveries at scrape time,
// from the database: every serve process reports the same figures.
type breakerCollector struct {
	pool            *pgxpool.Pool
	open, age, held *prometheus.Desc
	scrapeTimeout   time.Duration
}

func newBreakerCollector(pool *pgxpool.Pool) *breakerCollector {
	return &breakerCollector{pool: pool, scrapeTimeout: 2 * time.Second,
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
	rows, err := c.pool.Query(ctx, `SELECT e.id, e.breaker_failures > 0 AND e.consecutive_failures >= e.breaker_failures,
    coalesce(extract(epoch FROM now() - min(d.created_at)), 0)::float8,
    count(d.id) FILTER (WHERE d.held = 'order'), count(d.id) FILTER (WHERE d.held = 'breaker')
FROM relay_endpoints e LEFT JOIN relay_deliveries d ON d.endpoint_id = e.id AND d.state = 'pending'
GROUP BY e.id`)
	if err != nil {
		return // a scrape during a database outage shows no relay gauges rather than failing
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id                 int64
			open               bool
			age                float64
			byOrder, byBreaker int64
		)
		if rows.Scan(&id, &open, &age, &byOrder, &byBreaker) != nil {
			return
		}
		ep := strconv.FormatInt(id, 10)
		v := 0.0
		if open {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, v, ep)
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age, ep)
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(byOrder), ep, heldOrder)
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(byBreaker), ep, heldBreaker)
	}
}
