package privacy_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/privacy"
)

// Retention takes every old body, however many (a batch holds 1,000): plain ones stored before
// sealing too, and inline copies of old receipts, not of young ones. It deletes an old data key that
// no longer seals anything even while another key of its booking (another process's) still seals a
// young body. A second run finds nothing and records nothing.
func TestRetentionShredsEveryOldBodyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := spares.Database(t)
	old := newEnv(t, pool, "") // the release before sealing
	old.deliver(t, "calendly-plain", "p1", []byte(`{"name":"Plain Paula"}`))
	e, other := newEnv(t, pool, keyA), newEnv(t, pool, keyA)
	e.deliver(t, "calendly-two", "t1", []byte(`{"name":"Two Early"}`))
	other.deliver(t, "calendly-two", "t2", []byte(`{"name":"Two Later"}`))
	e.exec(t,
		`INSERT INTO receipt_bodies (digest, body) SELECT sha256(('b' || g)::bytea), ('{"bulk":' || g || '}')::bytea FROM generate_series(1, 1001) g`,
		`INSERT INTO receipts (provider, received_at, delivery_id, outcome, body)
SELECT 'calendly', now() - interval '500 days', 'inline' || g, 'ignored', ('{"inline":' || g || '}')::bytea FROM generate_series(1, 1001) g`,
		`INSERT INTO receipts (provider, received_at, delivery_id, outcome, body) VALUES ('calendly', now(), 'young', 'ignored', '{"name":"Young Yves"}')`,
		`UPDATE receipt_bodies SET stored_at = now() - interval '500 days' WHERE subject IS NULL
    OR digest = (SELECT body_digest FROM receipts WHERE delivery_id = 't1')`,
		`UPDATE subject_keys SET created_at = now() - interval '500 days'`)
	var keys int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM subject_keys WHERE subject = 'calendly-two'`).Scan(&keys))
	require.Equal(t, 2, keys, "each process made its own key")

	cutoff := time.Now().Add(-400 * 24 * time.Hour)
	c, err := privacy.ShredOlderThan(ctx, pool, postgres.NewStore(pool), cutoff)
	require.NoError(t, err)
	assert.Equal(t, privacy.Counts{Bodies: 1001 + 1 + 1, InlineBodies: 1001, DataKeys: 1}, c)
	d := string(dump(t, pool))
	assert.NotContains(t, d, string(hexOf("Plain Paula")))
	assert.NotContains(t, d, string(hexOf(`{"bulk":1001}`)))
	assert.NotContains(t, d, string(hexOf(`{"inline":1001}`)))
	assert.Contains(t, d, string(hexOf("Young Yves")), "a young receipt's inline body stays")
	assert.Equal(t, []byte(`{"name":"Two Later"}`), e.bodiesOf(t, "calendly-two")[1].Receipt.Body)
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM subject_keys WHERE subject = 'calendly-two'`).Scan(&keys))
	assert.Equal(t, 1, keys, "the key that sealed only the old body is gone")
	list, err := privacy.NewEraser(pool, nil, owners(pool)).Erasures(ctx, 10)
	require.NoError(t, err)
	assert.Len(t, list, 2, "one per transaction")

	c, err = privacy.ShredOlderThan(ctx, pool, postgres.NewStore(pool), cutoff)
	require.NoError(t, err)
	assert.Equal(t, privacy.Counts{}, c, "tombstones are not shredded again")
	list, err = privacy.NewEraser(pool, nil, owners(pool)).Erasures(ctx, 10)
	require.NoError(t, err)
	assert.Len(t, list, 2, "a run that shredded nothing records nothing")
}
