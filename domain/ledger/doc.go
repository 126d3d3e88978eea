// Package ledger records deliveries: for each booking a delivery touches it loads the booking's
// stream, recognises event IDs already stored (duplicate), lets booking.Decide validate the rest, and
// commits the appends with the exact expected version together with the delivery's receipt. On a
// version conflict it reloads and decides again, a bounded number of times. A delivery's personal
// data (Personal: contacts, and the free text split off its events) is committed with it but never
// into the events; StorableText is the one bound on stored and echoed text.
//
// It imports only the standard library and domain/... packages. Its ports (Store, Codec, and the
// BodySealer a store seals receipt bodies with) are declared
// here, by their consumer; adapters implement them.
package ledger
