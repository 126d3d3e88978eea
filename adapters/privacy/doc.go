// Package privacy keeps the personal data the ledger must not put in its immutable events, where it
// can be erased on request (GDPR art. 17; ADR 0015, docs/operations/personal-data.md).
//
//   - texts.go is the free-text side table: the cancel and rejection reasons the ledger splits off
//     every event (booking.SplitFreeText), read back into history, and erased per booking.
//
// The package owns its tables (migrations 0130–0139). It imports the domain, projections and pgx; it
// must not import the HTTP server, provider packages or event-store adapters.
package privacy
