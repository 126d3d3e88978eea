// Package relaymetrics is the relay's Prometheus metrics: the counters and histogram adapters/relay
// records as it attempts deliveries and raises alerts, and the gauges read from the relay's tables
// at each scrape (through adapters/postgres/relaystore) — deliveries by state, each endpoint's
// breaker, backlog age and held deliveries (docs/operations/monitoring.md). It imports prometheus,
// pgx and relaystore only; adapters/relay re-exports Metrics and NewMetrics.
package relaymetrics
