// Package booking is the functional core of a booking: its provider-neutral events, Decide (validate a
// command into events) and Evolve (apply an event, never failing), and Fold, which orders a booking's
// events by (provider time, type precedence, event ID) so that its state depends only on the set of
// events, never on the order or number of times they arrived.
//
// It imports only the standard library and domain/eventlog (for the event ID type). It never reads the
// clock or generates IDs: both are passed in.
package booking
