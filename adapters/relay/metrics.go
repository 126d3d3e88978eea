package relay

import (
	"bookingledger/adapters/postgres/relaystore"
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
	reg.MustRegister(m.attempts, m.latency, m.completes, m.alerts, &stateCollector{store: relaystore.New(pool),
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
	store *relaystore.Store
	desc  *prometheus.Desc
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := c.store.StateCounts(ctx)
	if err != nil {
		return // a scrape during a database outage shows no relay gauges rather than failing
	}
	for _, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n.N), strconv.FormatInt(n.Endpoint, 10), n.State)
	}
}
