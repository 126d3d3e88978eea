// Package history is the auditor's booking history, independent of where it is stored: BuildHistory
// puts a booking's receipts, events (in arrival order and in the order the fold used), calendar row,
// reconciliation items and process steps together with the findings an auditor should notice, and
// the Write functions render it, the steps and the receipts as text for the CLI.
//
// adapters/postgres/readmodel loads a HistoryInput and calls BuildHistory. This package imports
// domain/..., projections/calendar and the standard library only.
package history
