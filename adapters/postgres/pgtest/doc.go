// Package pgtest gives tests a fresh, migrated PostgreSQL database of their own, created in the cluster
// named by BOOKINGLEDGER_TEST_DATABASE_URL and dropped when the test ends, so that tests running in
// parallel (and other packages' tests) never see each other's rows.
//
// Without that variable a test is skipped with a message saying to run `make test`, except in CI
// (CI=true), where it fails. It imports adapters/postgres (for Migrate), pgx and testing; production
// code must not import it.
package pgtest
