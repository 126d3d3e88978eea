package main

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"bookingledger/projections"
)

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

// projectionCollector exports a runner's status as metrics. The runner's health is not part of
// /readyz on purpose: readiness gates webhook traffic, which does not depend on the projection (a
// lagging or failing projection delays reads, never acknowledgements), and a standby runner — another
// serve process holds the projection's lock — is the normal state of every instance but one.
type projectionCollector struct {
	runner                    *projections.Runner
	active, applied, lastSeen *prometheus.Desc
}

func newProjectionCollector(r *projections.Runner) *projectionCollector {
	labels := []string{"projection"}
	return &projectionCollector{
		runner: r,
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
	st := c.runner.Status()
	b2f := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	var last float64
	if !st.LastApply.IsZero() {
		last = float64(st.LastApply.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, b2f(st.Active), st.Projection)
	ch <- prometheus.MustNewConstMetric(c.applied, prometheus.CounterValue, float64(st.Applied), st.Projection)
	ch <- prometheus.MustNewConstMetric(c.lastSeen, prometheus.GaugeValue, last, st.Projection)
}
