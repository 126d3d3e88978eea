package privacy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"bookingledger/adapters/postgres"
	"bookingledger/adapters/privacy"
	"bookingledger/domain/booking"
	"bookingledger/domain/ledger"
)

// What a reader gets from stored bodies that are not what was sealed: a sealed body moved into another
// body's row (another person's body under this receipt), cut short or altered does not open; a body
// whose data key is gone (erased while it was being read) reads as erased; a data key whose wrapped
// form is cut short does not open. Never a panic, never another body.
func TestAlteredSealedBodiesDoNotOpen(t *testing.T) {
	t.Parallel()
	pool := spares.Database(t)
	e := newEnv(t, pool, keyA)
	for _, b := range []booking.ID{"calendly-moved", "calendly-source", "calendly-short", "calendly-flipped", "calendly-keyless", "calendly-badkey"} {
		e.deliver(t, b, string(b), []byte(`{"name":"`+string(b)+` person"}`))
	}
	e.exec(t,
		`UPDATE receipt_bodies SET body = (SELECT body FROM receipt_bodies WHERE subject = 'calendly-source') WHERE subject = 'calendly-moved'`,
		`UPDATE receipt_bodies SET body = substring(body FOR 40) WHERE subject = 'calendly-short'`,
		`UPDATE receipt_bodies SET body = set_byte(body, length(body) - 1, get_byte(body, length(body) - 1) # 1) WHERE subject = 'calendly-flipped'`,
		`DELETE FROM subject_keys WHERE subject = 'calendly-keyless'`,
		`UPDATE subject_keys SET wrapped = '\x01' WHERE subject = 'calendly-badkey'`)

	reader := newEnv(t, pool, keyA) // another process: nothing cached
	for b, want := range map[booking.ID]error{"calendly-moved": privacy.ErrCorruptBody, "calendly-short": privacy.ErrCorruptBody,
		"calendly-flipped": privacy.ErrCorruptBody, "calendly-badkey": privacy.ErrWrongMasterKey} {
		_, err := reader.store.ReceiptsForBooking(context.Background(), string(b))
		assert.ErrorIs(t, err, want, b)
	}
	rs := reader.bodiesOf(t, "calendly-keyless")
	require.Len(t, rs, 1)
	assert.Nil(t, rs[0].Receipt.Body)
	assert.True(t, rs[0].Body.Erased, "a body whose data key is gone is gone")
	assert.Equal(t, []byte(`{"name":"calendly-source person"}`), reader.bodiesOf(t, "calendly-source")[0].Receipt.Body)
}

// The master key list's edges: blank is unset; an id of 64 characters, and a key in unpadded base64url
// (the form other tools print), are accepted, and the latter opens what the padded form sealed; DEL is
// no printable character; ValidateKeyID, which `keys generate --id` uses, refuses the list's
// separators.
func TestMasterKeyListEdges(t *testing.T) {
	t.Parallel()
	_, err := privacy.ParseKeyring(" \n\t")
	require.ErrorIs(t, err, privacy.ErrNoMasterKey)
	b64 := keyA[len("a:"):]
	_, err = privacy.ParseKeyring("k\x7f:" + b64)
	require.ErrorIs(t, err, privacy.ErrMasterKeyFormat)
	long := strings.Repeat("k", 64)
	ring, err := privacy.ParseKeyring(long + ":" + b64)
	require.NoError(t, err)
	assert.Equal(t, long, ring.Newest())
	for _, id := range []string{"a:b", "a,b", "a\x7f"} {
		require.ErrorIs(t, privacy.ValidateKeyID(id), privacy.ErrKeyID, "%q", id)
	}
	require.NoError(t, privacy.ValidateKeyID("k2-2027~"))

	pool := spares.Database(t)
	e := newEnv(t, pool, keyA)
	e.deliver(t, "calendly-url", "u1", []byte(`{"name":"URL Person"}`))
	raw := newEnv(t, pool, "a:"+strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(b64), "="))
	assert.Equal(t, []byte(`{"name":"URL Person"}`), raw.bodiesOf(t, "calendly-url")[0].Receipt.Body)
}

// A body stored in plain text by a release before sealing is sealed in place when it comes again; a
// body that retention shredded stays shredded when it comes again (the tombstone is not replaced).
func TestABodyThatComesAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := spares.Database(t)
	old, e := newEnv(t, pool, ""), newEnv(t, pool, keyA)
	plain := []byte(`{"name":"Plain Pete"}`)
	old.deliver(t, "calendly-again", "a1", plain)
	e.deliver(t, "calendly-again", "a1", plain)
	d := string(dump(t, pool))
	assert.NotContains(t, d, string(hexOf("Plain Pete")), "sealed in place")
	for _, r := range e.bodiesOf(t, "calendly-again") {
		assert.Equal(t, plain, r.Receipt.Body)
	}

	shredded := []byte(`{"name":"Old Olive"}`)
	e.deliver(t, "calendly-shredded", "s1", shredded)
	e.exec(t, `UPDATE receipt_bodies SET stored_at = now() - interval '500 days' WHERE subject = 'calendly-shredded'`)
	c, err := privacy.ShredOlderThan(ctx, pool, postgres.NewStore(pool), time.Now().Add(-400*24*time.Hour))
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Bodies)
	newEnv(t, pool, keyA).deliver(t, "calendly-shredded", "s1", shredded) // another process retries it
	for _, r := range e.bodiesOf(t, "calendly-shredded") {
		assert.True(t, r.Body.Erased, "receipt %d", r.ID)
	}
}

// A plain body stored before sealing that comes again is sealed in place as its subject's, under the
// key that sealed it (the commit's ON CONFLICT ... DO UPDATE, postgres.bodyCTEs, sets subject and key_id with the
// body): retention then keeps that key while the body is young, however the subject's other bodies
// age, and shreds the body itself once it is old. Sealed without its subject or key in the row, the
// key would go with the subject's last other body (the body unreadable long before its retention),
// or the body would look like a tombstone and never be shredded.
func TestABodySealedWhenItComesAgainIsItsSubjectsUntilRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := spares.Database(t)
	old, e := newEnv(t, pool, ""), newEnv(t, pool, keyA)
	plain := []byte(`{"name":"Resealed Rita"}`)
	old.deliver(t, "calendly-resealed", "r1", plain)
	e.deliver(t, "calendly-resealed", "r1", plain)
	e.deliver(t, "calendly-resealed", "r2", []byte(`{"name":"Resealed Rita","n":2}`))

	var subject string
	var sealed bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT subject, key_id IS NOT NULL FROM receipt_bodies WHERE digest = sha256($1)`, plain).Scan(&subject, &sealed))
	assert.Equal(t, "calendly-resealed", subject)
	assert.True(t, sealed)

	e.exec(t, `UPDATE receipt_bodies SET stored_at = now() - interval '500 days' WHERE digest = (SELECT body_digest FROM receipts WHERE delivery_id = 'r2')`)
	cutoff := time.Now().Add(-400 * 24 * time.Hour)
	c, err := privacy.ShredOlderThan(ctx, pool, postgres.NewStore(pool), cutoff)
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Bodies)
	assert.Zero(t, c.DataKeys, "the key still seals the young body")
	for _, r := range e.bodiesOf(t, "calendly-resealed") {
		if r.Receipt.DeliveryID == "r1" {
			assert.Equal(t, plain, r.Receipt.Body, "receipt %d opens", r.ID)
		} else {
			assert.True(t, r.Body.Erased, "receipt %d", r.ID)
		}
	}

	e.exec(t, `UPDATE receipt_bodies SET stored_at = now() - interval '500 days' WHERE digest = sha256('{"name":"Resealed Rita"}')`)
	c, err = privacy.ShredOlderThan(ctx, pool, postgres.NewStore(pool), cutoff)
	require.NoError(t, err)
	assert.EqualValues(t, 1, c.Bodies, "the resealed body is shredded once old")
	assert.EqualValues(t, 1, c.DataKeys)
	for _, r := range e.bodiesOf(t, "calendly-resealed") {
		assert.True(t, r.Body.Erased, "receipt %d", r.ID)
	}
}

// A body that retention shredded stays shredded when it comes again, whether it was sealed or stored
// in plain text before sealing began (TestABodyThatComesAgain: sealed): the tombstone of a plain body
// has no subject and no key either, like a plain body, and the commit (postgres.bodyCTEs) must not take it for one
// to seal in place.
func TestAPlainBodyShreddedByRetentionStaysShreddedWhenItComesAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := spares.Database(t)
	old := newEnv(t, pool, "") // the release before sealing
	body := []byte(`{"name":"Legacy Lena"}`)
	old.deliver(t, "calendly-legacy-shredded", "l1", body)
	old.exec(t, `UPDATE receipt_bodies SET stored_at = now() - interval '500 days'`)
	c, err := privacy.ShredOlderThan(ctx, pool, postgres.NewStore(pool), time.Now().Add(-400*24*time.Hour))
	require.NoError(t, err)
	require.EqualValues(t, 1, c.Bodies)

	e := newEnv(t, pool, keyA)
	assert.Equal(t, ledger.OutcomeDuplicate, e.deliver(t, "calendly-legacy-shredded", "l1", body).Outcome) // a retry, by a sealing process
	rs := e.bodiesOf(t, "calendly-legacy-shredded")
	require.Len(t, rs, 2)
	for _, r := range rs {
		assert.True(t, r.Body.Erased, "receipt %d", r.ID)
		assert.Nil(t, r.Receipt.Body, "receipt %d", r.ID)
	}
	var sealed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM receipt_bodies WHERE key_id IS NOT NULL`).Scan(&sealed))
	assert.Zero(t, sealed, "nothing sealed again")
}
