// Package plantest checks, for the tests of the projections (and of erasure), that the statements a
// batch sends keep index-based plans as the tables grow (ADR 0019). It owns the one rule of what an
// unindexed scan is (a Seq Scan, an index scan without a condition or, on a B-tree, without one on its
// leading key, an overlap read of the claims' start index without a bounded start, a watched function
// not inlined),
// the explain of a statement with the arguments it was sent with (its custom plan, and the plan a
// connection keeps from its sixth execution), the plan's text for failure messages, and a pgx tracer
// that collects the statements to explain.
//
// Only tests import it. It imports pgx and testify, and must not import the packages whose statements
// it checks (readmodel, process, privacy): they pass in the tables they read.
package plantest
