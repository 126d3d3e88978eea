package relay

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the relay's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	attempts  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	completes *prometheus.CounterVec
	alerts    *prometheus.CounterVec
}

// NewMetrics registers the relay's metrics on reg, with gauges of the deliveries waiting (the queue
// depth), paused and dead per endpoint, read from pool at each scrape.
func NewMetrics(reg prometheus.Registerer, pool *pgxpool.Pool) *Metrics {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bookingledger_relay_attempts_total",
			Help: "Delivery attempts by endpoint and outcome (succeeded, failed, gone)."}, []string{"endpoint", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bookingledger_relay_attempt_duration_seconds",
			Help: "Time from sending an attempt to the end of the receiver's answer.", Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10)},
			[]string{"endpoint"}),
		completes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bookingledger_relay_deliveries_total",
			Help: "Deliveries finished by endpoint and outcome (succeeded, dead)."}, []string{"endpoint", "outcome"}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bookingledger_relay_alerts_total",
			Help: "Endpoint alerts by endpoint and kind (failing, recovered)."}, []string{"endpoint", "kind"}),
	}
	reg.MustRegister(m.attempts, m.latency, m.completes, m.alerts, &stateCollector{pool: pool,
		desc: prometheus.NewDesc("bookingledger_relay_deliveries", "Deliveries not finished (pending: the queue depth; paused) or dead, by endpoint.",
			[]string{"endpoint", "state"}, nil)}, newBreakerCollector(pool))
	return m
}

func (m *Metrics) attempt(endpoint, outcome string, latency time.Duration) {
	if m == nil {
		return
	}
	m.attempts.WithLabelValues(endpoint, outcome).Inc()
	m.latency.WithLabelValues(endpoint).Observe(latency.Seconds())
}

func (m *Metrics) completed(endpoint, outcome string) {
	if m == nil {
		return
	}
	m.completes.WithLabelValues(endpoint, outcome).Inc()
}

func (m *Metrics) alert(endpoint, kind string) {
	if m == nil {
		return
	}
	m.alerts.WithLabelValues(endpoint, kind).Inc()
}

// stateCollector counts deliveries by state at scrape time: every serve process reports the same
// database-wide figures.
type stateCollector struct {
	pool *pgxpool.Pool
	desc *prometheus.Desc
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := c.pool.Query(ctx, `SELECT e.id, s.state, count(d.id)
FROM relay_endpoints e CROSS JOIN (VALUES ('pending'), ('paused'), ('dead')) s(state)
LEFT JOIN relay_deliveries d ON d.endpoint_id = e.id AND d.state = s.state
GROUP BY e.id, s.state`)
	if err != nil {
		return // a scrape during a database outage shows no relay gauges rather than failing
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id    int64
			state string
			n     int64
		)
		if rows.Scan(&id, &state, &n) != nil {
			return
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), strconv.FormatInt(id, 10), state)
	}
}
