// Package checkpoint puts any projection whose state lives in PostgreSQL on the projections runner. A
// projection is its tables plus one ApplyFunc; this package owns its row in projection_checkpoints,
// the compare-and-set that keeps two runners from committing over each other, and the reset that a
// rebuild starts with; and the Locker that elects one active runner per projection (a session-level
// advisory lock on a dedicated connection). The changes of a batch and the checkpoint of its last event commit in one
// transaction (invariant 7: exactly once on read models, and on the records of effects a projection
// plans, such as process steps and relay deliveries).
//
// It imports domain/eventlog, projections and pgx; it must not import HTTP, provider or other store
// packages.
package checkpoint
