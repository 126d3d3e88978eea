// Package eventlogtest is the conformance suite of the event-store port (domain/eventlog). Every store
// adapter runs it from its own tests with a factory of fresh stores:
//
//	func TestConformance(t *testing.T) { eventlogtest.Run(t, func(t *testing.T) eventlog.Store { ... }) }
//
// It may import testify and google/uuid (it is test support, not domain code). Streams are named with a
// random suffix per test, and global-log assertions only look at the test's own streams, so the suite
// also runs against a shared real server.
//
// SelectedStore reads BOOKINGLEDGER_TEST_EVENT_STORE for the suites (ingress, projections) that run
// once per store.
package eventlogtest
