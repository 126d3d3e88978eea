// Package process carries out the process steps: River workers do each step the process projection
// planned — the host's calendar event (CalDAV, Google Calendar, Microsoft 365) and the invitee's
// email over SMTP — exactly once (docs/process-steps.md, ADR 0010).
//
// The rule is pure and lives in projections/steps; the process_steps table, the projection that plans
// into it, the store and the sweep are its owner's, adapters/postgres/stepstore. This package keeps:
//
//   - worker.go: a worker commits 'requested' before it calls a target, probes (CalDAV) or asks an
//     operator (email) when it finds a step 'requested' again, and retries only what provably did
//     nothing; seatskip.go tells each leaving attendee of a seated booking once. compose.go writes an
//     email and a calendar event from adapters/render's templates (docs/templates.md), in the
//     invitee's time zone, else the resource's, else UTC; reason.go says why an item opens.
//   - jobs.go: the step job (StepArgs, on Queue) and InsertJobs, which the projection, the sweep and
//     an operator's retry use.
//   - targets.go, transport.go, notarget.go: the target ports Calendar and Mailer, and the errors that
//     say what a call proved; adapters/caldav, gcal, msgraph, calroute and email implement them.
//
// Every table is read and written through the small interfaces declared here: Steps
// (stepstore.Store: the step rows, and a step's reconciliation item with its outcome), SlotReader
// (readmodel.StepReader, the calendar's tables), ContactReader (postgres.Contacts). The package
// imports domain/..., projections/steps, adapters/render, pgx and River; it must not import the HTTP
// server, provider packages, event-store adapters or the tables' owners.
package process
