// Package ledgertest is the contract suite of the ledger's storage port (domain/ledger.Store), run
// through ledger.Service: duplicates recognised, conflicts retried and bounded, appends and receipt
// committed together (or, where a store cannot, healed by the retry), what a failed commit leaves.
// Every ledger store runs it from its own tests — the PostgreSQL store, esdb.LedgerStore and the
// in-memory store that domain tests use:
//
//	func TestLedgerContract(t *testing.T) { ledgertest.Run(t, func(t *testing.T) ledgertest.Fixture { ... }) }
//
// Booking IDs carry a random suffix per test, so the suite also runs against a shared server. It may
// import testify, google/uuid and adapters/eventcodec (it is test support, not domain code).
package ledgertest
