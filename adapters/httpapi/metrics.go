package httpapi

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names, exported so that docs, dashboards and tests name them one way.
const (
	MetricDeliveries      = "bookingledger_webhook_deliveries_total"
	MetricRejections      = "bookingledger_webhook_rejections_total"
	MetricReceiptsDropped = "bookingledger_webhook_rejected_receipts_dropped_total"
	MetricAckSeconds      = "bookingledger_webhook_ack_seconds"
	MetricFindings        = "bookingledger_webhook_findings_total"
	// MetricAdmissionWaitSeconds: how long an authentic delivery waited for a recording slot, by result
	// (admitted, shed: answered 503 "overloaded"); only when recording is bounded.
	MetricAdmissionWaitSeconds = "bookingledger_webhook_admission_wait_seconds"
)

// Outcome labels of MetricDeliveries beyond the ledger outcomes: "rejected" (not verified: 401, 413,
// 400) and "unavailable" (not recorded: 503).
const (
	outcomeRejected    = "rejected"
	outcomeUnavailable = "unavailable"
)

// unknownProviderLabel keeps the provider label bounded: a path segment chosen by the caller is never a
// label value.
const unknownProviderLabel = "unknown"

type metrics struct {
	deliveries      *prometheus.CounterVec
	rejections      *prometheus.CounterVec
	receiptsDropped *prometheus.CounterVec
	ack             *prometheus.HistogramVec
	findings        *prometheus.CounterVec
	admissionWait   *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricDeliveries,
			Help: "Webhook requests by provider and outcome (accepted, duplicate, ignored, quarantined, rejected, unavailable).",
		}, []string{"provider", "outcome"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRejections,
			Help: "Webhook requests refused before the ledger (401, 404, 413, 400) by provider and reason; every one is counted, receipted or not.",
		}, []string{"provider", "reason"}),
		receiptsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricReceiptsDropped,
			Help: "Rejected requests whose receipt was not written because the per-provider rate limit was exhausted.",
		}, []string{"provider"}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricFindings,
			Help: "Accepted deliveries whose events the booking's state refused (kept, changed nothing), by provider and finding (after_terminal, superseded).",
		}, []string{"provider", "finding"}),
		ack: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: MetricAckSeconds,
			Help: "Time from request start to a 2xx acknowledgement (after the commit), by provider.",
			// Dense below 10 ms (the target p99) and up to the providers' read timeouts.
			Buckets: []float64{.0005, .001, .002, .003, .005, .0075, .01, .015, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"provider"}),
		admissionWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: MetricAdmissionWaitSeconds,
			Help: "Time an authentic delivery waited for a recording slot (BOOKINGLEDGER_RECORD_MAX_INFLIGHT), by result (admitted, shed: 503 overloaded after at most BOOKINGLEDGER_RECORD_QUEUE_WAIT).",
			// Around the queue wait (2 s by default) and well past it: a shed delivery in a bucket above
			// the wait would be one that was not answered fast.
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2, 2.5, 5, 10},
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.deliveries, m.rejections, m.receiptsDropped, m.ack, m.findings, m.admissionWait} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register webhook metrics: %w", err)
		}
	}
	return m, nil
}
