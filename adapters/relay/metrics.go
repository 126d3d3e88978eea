package relay

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"bookingledger/adapters/relay/relaymetrics"
)

// Metrics are the relay's Prometheus metrics (adapters/relay/relaymetrics). A nil *Metrics records
// nothing.
type Metrics = relaymetrics.Metrics

// NewMetrics registers the relay's metrics on reg, with gauges of the deliveries waiting (the queue
// depth), paused and dead per endpoint, read from pool at each scrape.
func NewMetrics(reg prometheus.Registerer, pool *pgxpool.Pool) *Metrics {
	return relaymetrics.New(reg, pool)
}
