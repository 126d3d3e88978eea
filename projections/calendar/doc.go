// Package calendar is the calendar projection's pure rule: Recompute over a connected component of
// bookings that share resources (rows, slot holders, statuses, reconciliation item changes), the
// booking row a stream folds to (BookingRow, payment links, series cancels), the natural order of
// booking IDs the slot-holder rule breaks ties with, the reconciliation item model, the calendar's
// query, cursor and page, the contact and search types the read side shares (people.go), and the
// calendar and items tables the CLI prints.
//
// Its adapter is adapters/postgres/readmodel: it loads a component's inputs, calls Recompute and
// writes what it returns. This package imports domain/..., projections (the sentinel errors) and
// the standard library only.
package calendar
