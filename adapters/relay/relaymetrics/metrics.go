package relaymetrics

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"bookingledger/adapters/postgres/relaystore"
)

// Metrics are the relay's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	attempts  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	completes *prometheus.CounterVec
	alerts    *prometheus.CounterVec
}

// New registers the relay's metrics on reg, with gauges of the deliveries waiting (the queue
// depth), paused and dead per endpoint, read from pool at each scrape.
func New(reg prometheus.Registerer, pool *pgxpool.Pool) *Metrics {
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
	reg.MustRegister(m.attempts, m.latency, m.completes, m.alerts, newStateCollector(pool))
	return m
}

// Attempt counts an attempt to endpoint with its outcome and latency.
func (m *Metrics) Attempt(endpoint, outcome string, latency time.Duration) {
	if m == nil {
		return
	}
	m.attempts.WithLabelValues(endpoint, outcome).Inc()
	m.latency.WithLabelValues(endpoint).Observe(latency.Seconds())
}

// Completed counts a delivery to endpoint that finished with outcome (succeeded, dead).
func (m *Metrics) Completed(endpoint, outcome string) {
	if m == nil {
		return
	}
	m.completes.WithLabelValues(endpoint, outcome).Inc()
}

// Alert counts an alert of kind (failing, recovered) about endpoint.
func (m *Metrics) Alert(endpoint, kind string) {
	if m == nil {
		return
	}
	m.alerts.WithLabelValues(endpoint, kind).Inc()
}

// stateCollector reports at scrape time, from the database, the deliveries by state and each
// endpoint's breaker, backlog age and held deliveries: every serve process reports the same figures.
type stateCollector struct {
	store                   *relaystore.Store
	states, open, age, held *prometheus.Desc
}

func newStateCollector(pool *pgxpool.Pool) *stateCollector {
	return &stateCollector{store: relaystore.New(pool),
		states: prometheus.NewDesc("bookingledger_relay_deliveries", "Deliveries not finished (pending: the queue depth; paused) or dead, by endpoint.",
			[]string{"endpoint", "state"}, nil),
		open: prometheus.NewDesc("bookingledger_relay_breaker_open",
			"1 while the endpoint's circuit breaker is open (one probe at a time, the rest held), 0 otherwise.", []string{"endpoint"}, nil),
		age: prometheus.NewDesc("bookingledger_relay_backlog_age_seconds",
			"Age of the endpoint's oldest pending delivery (0: none pending).", []string{"endpoint"}, nil),
		held: prometheus.NewDesc("bookingledger_relay_deliveries_held",
			"Pending deliveries held without a job, by endpoint and reason (order: an earlier version first; breaker: the breaker is open).",
			[]string{"endpoint", "reason"}, nil)}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.states, c.open, c.age, c.held} {
		ch <- d
	}
}

// Collect reads the figures; a scrape during a database outage shows no relay gauges rather than
// failing.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if counts, err := scrape(c.store.StateCounts); err == nil {
		for _, n := range counts {
			ch <- prometheus.MustNewConstMetric(c.states, prometheus.GaugeValue, float64(n.N), strconv.FormatInt(n.Endpoint, 10), n.State)
		}
	}
	gs, err := scrape(c.store.BreakerGauges)
	if err != nil {
		return
	}
	for _, g := range gs {
		ep := strconv.FormatInt(g.Endpoint, 10)
		v := 0.0
		if g.Open {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.open, prometheus.GaugeValue, v, ep)
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, g.AgeSeconds, ep)
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(g.ByOrder), ep, relaystore.HeldOrder)
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(g.ByBreaker), ep, relaystore.HeldBreaker)
	}
}

// scrape runs one query of a scrape, bounded to 2 s.
func scrape[T any](query func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return query(ctx)
}
