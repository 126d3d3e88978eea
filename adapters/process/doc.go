// Package process acts on the ledger: the process projection turns each booking's calendar state into
// process steps — the host's calendar event over CalDAV and the invitee's email over SMTP — and River
// workers carry them out, each exactly once (docs/process-steps.md, ADR 0010).
//
// The rule is pure and lives in projections/steps (what steps a thread's state needs, the threads a
// batch reaches); this package is its adapter, shaped as every projection's (projections/steps, the
// calendar's adapters/postgres/readmodel): one type implements projections.Projection on its own
// checkpoint row, loads the rule's inputs, calls it, and writes what it returns in the transaction
// that advances the checkpoint. It owns the process_steps table and the steps' River jobs (an
// erasure skips an erased booking's steps through EraseSteps, in adapters/privacy's transaction):
//
//   - projection.go is the projection on the runner: it never runs ahead of the calendar projection,
//     reads the calendar through CalendarReader, plans the touched bookings plus those that share
//     their slots, series and reschedule chains, and inserts step rows and their River jobs.
//   - worker.go commits 'requested' before it calls a target, probes (CalDAV) or asks an operator
//     (email) when it finds a step 'requested' again, and retries only what provably did nothing; it
//     reads the calendar through SlotReader and the invitees' addresses through ContactReader.
//   - store.go reads steps for history, the CLI, metrics, and the operator's resolutions; step.go
//     holds the step row and its reads and writes; seats.go the seat cancellations; compose.go writes an email
//     and a calendar event from the templates of the render subpackage (docs/templates.md), in the
//     invitee's time zone, else the resource's, else UTC; erase.go is
//     process_steps' part of an erasure (EraseSteps), which adapters/privacy calls in its transaction.
//
// Other owners' tables are read only through the small interfaces declared here: CalendarReader and
// SlotReader (readmodel.StepReader, the calendar's tables), ContactReader (postgres.Contacts, the
// contacts that adapters/postgres saves). The exception is reconciliation_items, the calendar's
// queue, where a worker opens a step's item in the statement that records its outcome and Store.Resolve
// closes it. Targets are the small interfaces Calendar and Mailer
// declared here; adapters/caldav and adapters/email implement them. The package imports domain/...,
// projections, projections/steps, the checkpoint package, pgx and River; it must not import the HTTP
// server, provider packages or event-store adapters.
package process
