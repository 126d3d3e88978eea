// Package steps is the process steps' rule as pure functions: from the calendar's rows of a batch's
// bookings and the steps their threads have, which steps to add, which pending ones are superseded
// (skipped) or wanted again (revived) — the host's calendar event and the invitee's emails
// (docs/process-steps.md, ADR 0010).
//
//   - plan.go: kinds, states, step keys, and PlanThread, the plan of one thread (a booking and the
//     bookings rescheduled from it) from its latest booking's row and its steps.
//   - threads.go: Rows, the calendar rows a batch reaches (its bookings, those that share their slots
//     or series, the reschedule chains), the threads they form, and PlanThreads.
//   - seats.go: the touched bookings of a batch, and each leaving attendee's own cancellation.
//
// Every projection has this shape: its rule is pure, in projections (the calendar's Recompute) or a
// subpackage of it (this one); its adapter is one type that implements projections.Projection on its
// own checkpoint row, loads the rule's inputs, calls it, and writes what it returns in the transaction
// that advances the checkpoint (adapters/postgres/readmodel for the calendar, adapters/process for
// the steps). The adapter reads another projection's tables only through that projection's package.
//
// This package imports the standard library and domain/... only.
package steps
