package postgres_test

import (
	"os"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/postgres/pgtest"
	"bookingledger/domain/ledger"
)

// TestErasedColumnMigrationUpgradesTombstones: a database migrated before 0600 holds bodies erased
// the old way (a tombstone at the start of the body, shared and inline); after the upgrade their
// erased_at says so, with the tombstone's time (the start of the era when the time does not read),
// readers report them erased, and bodies that were not erased stay unmarked.
func TestErasedColumnMigrationUpgradesTombstones(t *testing.T) {
	t.Parallel()
	pool := pgtest.Open(t, pgtest.NewEmptyDatabaseURL(t))
	ctx := testCtx(t)
	older := fstest.MapFS{}
	for _, name := range migrationFiles(t) {
		if name < "0600" {
			data, err := os.ReadFile("migrations/" + name + ".sql")
			require.NoError(t, err)
			older["migrations/"+name+".sql"] = &fstest.MapFile{Data: data}
		}
	}
	require.NoError(t, postgres.MigrateFS(ctx, pool, older))
	_, err := pool.Exec(ctx, `INSERT INTO receipt_bodies (digest, body) VALUES
    (sha256('a'), '\x00626c6531'::bytea || convert_to('2026-03-04T05:06:07Z', 'UTF8')),
    (sha256('b'), '\x00626c6531'::bytea || convert_to('garbled', 'UTF8')),
    (sha256('c'), convert_to('{"name":"Kept"}', 'UTF8'));
INSERT INTO receipts (provider, received_at, delivery_id, outcome, body, body_digest) VALUES
    ('calendly', now(), 'shared-erased', 'accepted', NULL, sha256('a')),
    ('calendly', now(), 'shared-garbled', 'accepted', NULL, sha256('b')),
    ('calendly', now(), 'shared-kept', 'accepted', NULL, sha256('c')),
    ('calendly', now(), 'inline-erased', 'accepted', '\x00626c6531'::bytea || convert_to('2025-01-02T03:04:05Z', 'UTF8'), NULL),
    ('calendly', now(), 'inline-kept', 'accepted', convert_to('{"name":"Inline"}', 'UTF8'), NULL)`)
	require.NoError(t, err)

	require.NoError(t, postgres.Migrate(ctx, pool))
	rs, err := postgres.NewStore(pool).ListReceipts(ctx, postgres.ReceiptFilter{})
	require.NoError(t, err)
	got := map[string]ledger.BodyState{}
	for _, r := range rs {
		got[r.Receipt.DeliveryID] = r.Body
		if r.Body.Erased {
			assert.Nil(t, r.Receipt.Body, r.Receipt.DeliveryID)
		}
	}
	require.Len(t, got, 5)
	assert.Equal(t, ledger.BodyState{Erased: true, ErasedAt: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}, got["shared-erased"])
	assert.Equal(t, ledger.BodyState{Erased: true, ErasedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}, got["inline-erased"])
	assert.True(t, got["shared-garbled"].Erased)
	assert.Equal(t, 1, got["shared-garbled"].ErasedAt.Year())
	assert.Equal(t, ledger.BodyState{Plain: []byte(`{"name":"Kept"}`)}, got["shared-kept"])
	assert.Equal(t, ledger.BodyState{Plain: []byte(`{"name":"Inline"}`)}, got["inline-kept"])
	assert.Equal(t, 2, count(t, pool, `SELECT count(*) FROM receipt_bodies WHERE erased_at IS NOT NULL`))
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM receipts WHERE body_erased_at IS NOT NULL`))
}

// receipt_body_ref, dead since receipt_body_put replaced it, is dropped (migration 0601).
// receipt_body_put has no caller since the commit stores bodies itself (bodyCTEs), but stays: instances
// of the previous release still call it during a rolling restart, and dropping it is a contract step
// for a later release (docs/operations/upgrades.md, rule 3).
func TestReceiptBodyRefIsDroppedAndPutStaysForTheReleaseBefore(t *testing.T) {
	t.Parallel()
	pool := spares.Database(t)
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM (SELECT 1) x WHERE to_regprocedure('receipt_body_ref(bytea)') IS NULL`))
	assert.Equal(t, 1, count(t, pool, `SELECT count(*) FROM (SELECT 1) x WHERE to_regprocedure('receipt_body_put(bytea, bytea, uuid, text, text, bytea)') IS NOT NULL`))
}
