// Package ledgerdb opens the database and the event store the way every command does: the store
// flags (-database-url, -event-store, -master-key), the pool, the migrated-schema check, the event
// store (PostgreSQL or EventStoreDB) with the PostgreSQL receipts, the read side the CLI queries, the
// master keys that seal receipt bodies and the owners an erasure changes.
package ledgerdb
