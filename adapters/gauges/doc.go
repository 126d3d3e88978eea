// Package gauges exports what the shared database holds as Prometheus gauges, read at each scrape:
// open reconciliation items by kind, quarantined receipts, process steps by kind and state, the job
// queue's backlog by River queue, and each projection's lag (events behind its checkpoint, when the
// checkpoint last moved), with bookingledger_state_scrape_ok saying whether every query answered: a
// query that fails leaves its gauge out of that scrape, never the others.
//
// It reads the job queue's tables (adapters/jobs) and the projections' checkpoints
// (adapters/postgres/checkpoint) through the pool it is given; the reconciliation items, the receipts
// and the process steps come through functions of the stores that own those tables
// (adapters/postgres/readmodel, adapters/postgres, adapters/postgres/stepstore). Every serve process
// reports the same values; alert rules take max() over instances (docs/operations/monitoring.md). The
// metrics of one process (requests, projection runners, relay attempts) are registered where they
// are counted, not here.
package gauges
