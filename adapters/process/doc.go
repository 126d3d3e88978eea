// Package process acts on the ledger: the process projection turns each booking's calendar state into
// process steps — the host's calendar event over CalDAV and the invitee's email over SMTP — and River
// workers carry them out, each exactly once (docs/process-steps.md, ADR 0010).
//
//   - plan.go is the pure planner: from a reschedule chain's latest calendar row and the steps that
//     exist, which steps to add, which pending ones are superseded (skipped) or wanted again.
//   - projection.go is the projection on the runner (adapters/postgres/checkpoint): it never runs
//     ahead of the calendar projection, plans the touched bookings plus those that share their slots,
//     and inserts step rows and their River jobs in the transaction that advances its checkpoint.
//   - worker.go commits 'requested' before it calls a target, probes (CalDAV) or asks an operator
//     (email) when it finds a step 'requested' again, and retries only what provably did nothing.
//   - store.go reads steps for history, the CLI, metrics, and the operator's resolutions.
//   - compose.go writes an email and a calendar event from the templates of the render subpackage
//     (docs/templates.md), in the invitee's time zone, else the resource's, else UTC.
//
// Targets are the small interfaces Calendar and Mailer declared here; adapters/caldav and adapters/
// email implement them. The package imports domain/eventlog, projections, the checkpoint package,
// pgx and River; it must not import the HTTP server, provider packages or event-store adapters.
package process
