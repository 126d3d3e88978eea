// Package privacy keeps the personal data the ledger must not put in its immutable events, where it
// can be erased on request (GDPR art. 17; ADR 0015, docs/operations/personal-data.md).
//
//   - texts.go is the free-text side table: the cancel and rejection reasons the ledger splits off
//     every event (booking.SplitFreeText), read back into history, and erased per booking.
//   - bodies.go seals receipt bodies per subject (ledger.BodySealer) with data keys it keeps in
//     subject_keys, wrapped by the master keys of keyring.go.
//   - erase.go erases a subject in one transaction: its data keys and free texts here, and every
//     other table through the owner of that table (Owners: the receipts and contacts of
//     adapters/postgres, the steps of adapters/postgres/stepstore, the calendar rows of the read model).
//     retention.go shreds bodies past their age through the receipts' owner.
//
// The package owns subject_keys and free_texts (both saved by the ledger's commit, in its one
// statement), erasures and erased_subjects (migrations 0130–0139; the commit looks its subjects up in
// erased_subjects, in the same statement), and the erasure lock's use (the key is bl_erasure_lock_key,
// migration 0600). It imports the domain, projections, pgx and River; it must
// not import the HTTP server, provider packages or the event-store adapters (adapters/postgres
// included; make lint checks it): the other tables' owners are handed in.
package privacy
