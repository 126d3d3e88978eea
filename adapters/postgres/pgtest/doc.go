// Package pgtest gives tests a fresh, migrated PostgreSQL database of their own, created in the cluster
// named by BOOKINGLEDGER_TEST_DATABASE_URL and dropped when the test ends, so that tests running in
// parallel (and other packages' tests) never see each other's rows.
//
// A migrated database is a copy (CREATE DATABASE ... TEMPLATE) of a template database the first test
// that needs one migrates; the template's name carries a digest of the embedded migrations
// (postgres.MigrationsDigest), so a changed migration set gets a template of its own. A package whose
// databases need more schema (River's tables) names it in an Extra, built into a template of its own
// once instead of into every database. Templates are named bl_template_<digest>[_<extra>] and stay in
// the cluster; a long-lived cluster keeps one per migration set it has seen (drop them when no test
// runs: the next test rebuilds the one it needs). A test binary creates and drops its databases through
// one small pool on the cluster's database, not a connection each.
//
// A package whose many tests each need an empty database of their own takes them from a Spares
// instead: a test that passed gives its database back, emptied and with its pool's warm connections,
// to the next test; a database that cannot be trusted to equal a fresh one (the test failed, left a
// session, an advisory lock, a schema change or changed migration rows) is dropped.
//
// Without BOOKINGLEDGER_TEST_DATABASE_URL a test is skipped with a message saying to run `make test`, except in CI
// (CI=true), where it fails. It imports adapters/postgres (for Migrate), pgx and testing; production
// code must not import it.
package pgtest
