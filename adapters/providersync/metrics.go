package providersync

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports the provider sync's state, read from the database when Prometheus scrapes: every
// instance reports the same values (alert rules take max() over instances).
type Collector struct {
	store     *Store
	providers []string
	log       *slog.Logger

	missed, unhealthy, lastDelivery, lastSync, syncFailing *prometheus.Desc
}

// NewCollector reports on providers (every configured one: those without an API credential report
// only their last delivery).
func NewCollector(store *Store, providers []string, log *slog.Logger) *Collector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := []string{"provider"}
	return &Collector{store: store, providers: providers, log: log,
		missed: prometheus.NewDesc("bookingledger_provider_missed_events_total",
			"Events the provider sync appended because no webhook had brought them: facts the webhooks missed.", l, nil),
		unhealthy: prometheus.NewDesc("bookingledger_provider_subscriptions_unhealthy",
			"Problems the last subscription check found (a disabled subscription, or none active for the webhook URL).", l, nil),
		lastDelivery: prometheus.NewDesc("bookingledger_provider_last_delivery_timestamp_seconds",
			"Unix time of the provider's newest verified webhook delivery, as the subscription watch last found it (0: none known).", l, nil),
		lastSync: prometheus.NewDesc("bookingledger_provider_last_sync_timestamp_seconds",
			"Unix time of the provider's last successful sync run (0: never).", l, nil),
		syncFailing: prometheus.NewDesc("bookingledger_provider_sync_failing",
			"1 when the provider's last sync run failed, else 0.", l, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.missed, c.unhealthy, c.lastDelivery, c.lastSync, c.syncFailing} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	states, err := c.store.States(ctx)
	if err != nil {
		c.log.Warn("provider sync gauges not read", "error", err.Error())
		return
	}
	for _, p := range c.providers {
		st := states[p]
		ch <- prometheus.MustNewConstMetric(c.missed, prometheus.CounterValue, float64(st.MissedTotal), p)
		ch <- prometheus.MustNewConstMetric(c.unhealthy, prometheus.GaugeValue, float64(st.Unhealthy), p)
		ch <- prometheus.MustNewConstMetric(c.lastDelivery, prometheus.GaugeValue, unixOrZero(st.LastDeliver), p)
		ch <- prometheus.MustNewConstMetric(c.lastSync, prometheus.GaugeValue, unixOrZero(st.LastOKAt), p)
		failing := 0.0
		if st.LastError != "" {
			failing = 1
		}
		ch <- prometheus.MustNewConstMetric(c.syncFailing, prometheus.GaugeValue, failing, p)
	}
}

func unixOrZero(t *time.Time) float64 {
	if t == nil {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
