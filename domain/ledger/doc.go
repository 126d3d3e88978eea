// Package ledger records deliveries: for each booking a delivery touches it loads the booking's
// stream, recognises event IDs already stored (duplicate), lets booking.Decide validate the rest, and
// commits the appends with the exact expected version together with the delivery's receipt. On a
// version conflict it reloads and decides again, a bounded number of times.
//
// It imports only the standard library and domain/... packages. Its ports (Store, Codec, and the
// BodySealer a store seals receipt bodies with) are declared
// here, by their consumer; adapters implement them.
package ledger
