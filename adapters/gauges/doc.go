// Package gauges exports what the shared database holds as Prometheus gauges, read at each scrape:
// open reconciliation items by kind, quarantined receipts, the job queue's backlog by River queue,
// and each projection's lag (events behind its checkpoint, when the checkpoint last moved), with
// bookingledger_state_scrape_ok saying whether every query answered.
//
// It reads the job queue's tables (adapters/jobs) and the projections' checkpoints
// (adapters/postgres/checkpoint) through the pool it is given; the reconciliation items and the
// receipts come through functions of the stores that own those tables (adapters/postgres/readmodel,
// adapters/postgres). Every serve process reports the same values; alert rules take max() over
// instances (docs/operations/monitoring.md). The metrics of one process (requests, projection
// runners, relay attempts) are registered where they are counted, not here.
package gauges
