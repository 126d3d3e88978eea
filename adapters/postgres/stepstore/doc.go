// Package stepstore owns the process_steps table (scripts/ownercheck): every statement that names it
// is here. It is the adapter of projections/steps, shaped as every projection's (the calendar's
// adapters/postgres/readmodel): one type implements projections.Projection on its own checkpoint row,
// loads the rule's inputs, calls it, and writes what it returns in the transaction that advances the
// checkpoint (docs/process-steps.md, ADR 0010).
//
//   - projection.go is the process projection on the runner: it never runs ahead of the calendar
//     projection, reads the calendar through CalendarReader (readmodel.StepReader), plans the touched
//     bookings plus those that share their slots, series and reschedule chains, and inserts step rows
//     and their River jobs (process.InsertJobs); seats.go plans each leaving attendee's cancellation.
//   - steps.go reads step rows and writes a plan; claims.go is the step workers' reads and writes
//     (process.Steps, implemented by Store).
//   - store.go reads steps for history, the CLI and metrics, applies operators' resolutions, and
//     sweeps steps left requested by a stopped worker.
//   - erase.go is process_steps' part of an erasure (EraseSteps, in adapters/privacy's transaction);
//     liveness.go ends the leases of a dead instance's steps (ReleaseLeases, a jobs.RescueHook).
//
// A step's reconciliation item is opened with its outcome and closed with its resolution through the
// queue's owner (readmodel.OpenItem, LockItem, CloseItem), in the same transaction.
package stepstore
