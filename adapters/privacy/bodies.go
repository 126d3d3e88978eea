package privacy

import (
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bookingledger/domain/ledger"
)

var _ ledger.BodySealer = (*Bodies)(nil)

// maxCachedKeys bounds each in-memory key map; past it the map starts again (a new data key per
// subject costs one key row, never a round trip).
const maxCachedKeys = 100_000

// Bodies seals receipt bodies with per-subject data keys (AES-256-GCM) and opens them for authorised
// readers. Data keys are made here, wrapped by the keyring's newest master key, and stored by the same
// statement that stores the body (the commit's, adapters/postgres bodyCTEs): sealing never waits for the database.
type Bodies struct {
	pool *pgxpool.Pool
	ring *Keyring

	mu        sync.Mutex
	bySubject map[string]*dataKey   // the key this process seals a subject's bodies with
	byID      map[[16]byte]*dataKey // keys opened for reading
}

type dataKey struct {
	id      [16]byte
	aead    cipher.AEAD
	kekID   string
	wrapped []byte
}

// NewBodies returns the sealer over pool's subject_keys with ring's master keys.
func NewBodies(pool *pgxpool.Pool, ring *Keyring) *Bodies {
	return &Bodies{pool: pool, ring: ring, bySubject: map[string]*dataKey{}, byID: map[[16]byte]*dataKey{}}
}

// SealBody implements ledger.BodySealer. The stored form is SealedPrefix, the data key's id, the
// plain body's digest, the nonce and the ciphertext; the key id and the digest (the body's identity,
// one row per digest) are associated data, so a sealed body copied into another row does not open.
func (b *Bodies) SealBody(subject string, body []byte) (ledger.SealedBody, error) {
	k, err := b.keyFor(subject)
	if err != nil {
		return ledger.SealedBody{}, err
	}
	digest := sha256.Sum256(body)
	head := make([]byte, 0, len(ledger.SealedPrefix)+16+32+12)
	head = append(append(append(head, ledger.SealedPrefix...), k.id[:]...), digest[:]...)
	nonce := randomBytes(k.aead.NonceSize())
	out := append(append(make([]byte, 0, len(head)+len(nonce)+len(body)+k.aead.Overhead()), head...), nonce...)
	out = k.aead.Seal(out, nonce, body, head)
	return ledger.SealedBody{Digest: digest, Data: out, KeyID: k.id, Subject: subject, KEKID: k.kekID, Wrapped: k.wrapped}, nil
}

func (b *Bodies) keyFor(subject string) (*dataKey, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if k, ok := b.bySubject[subject]; ok {
		return k, nil
	}
	raw := randomBytes(32)
	aead, err := newAEAD(raw)
	if err != nil {
		return nil, err
	}
	k := &dataKey{aead: aead}
	copy(k.id[:], randomBytes(16))
	k.id[6] = k.id[6]&0x0f | 0x40 // a version 4 UUID, as the column's readers expect
	k.id[8] = k.id[8]&0x3f | 0x80
	k.kekID, k.wrapped = b.ring.wrap(subject, raw)
	if len(b.bySubject) >= maxCachedKeys {
		b.bySubject = map[string]*dataKey{}
	}
	b.bySubject[subject] = k
	return k, nil
}

// ErrCorruptBody: a sealed body does not open with its data key, or names another digest.
var ErrCorruptBody = errors.New("sealed receipt body does not open (altered, or stored under another digest)")

// OpenBody implements ledger.BodySealer.
func (b *Bodies) OpenBody(ctx context.Context, digest, stored []byte) (ledger.BodyState, error) {
	rest, ok := bytes.CutPrefix(stored, []byte(ledger.SealedPrefix))
	if !ok {
		return ledger.BodyState{Plain: stored}, nil // stored before bodies were sealed
	}
	if len(rest) < 16+32+12 {
		return ledger.BodyState{}, ErrCorruptBody
	}
	var id [16]byte
	copy(id[:], rest[:16])
	if digest != nil && !bytes.Equal(digest, rest[16:48]) {
		return ledger.BodyState{}, ErrCorruptBody
	}
	k, err := b.openKey(ctx, id)
	if errors.Is(err, ErrShredded) {
		return ledger.BodyState{Erased: true}, nil
	}
	if err != nil {
		return ledger.BodyState{}, err
	}
	head := stored[:len(ledger.SealedPrefix)+48]
	n := k.aead.NonceSize()
	ct := rest[48:]
	if len(ct) < n {
		return ledger.BodyState{}, ErrCorruptBody
	}
	plain, err := k.aead.Open(nil, ct[:n], ct[n:], head)
	if err != nil {
		return ledger.BodyState{}, ErrCorruptBody
	}
	return ledger.BodyState{Plain: plain}, nil
}

func (b *Bodies) openKey(ctx context.Context, id [16]byte) (*dataKey, error) {
	b.mu.Lock()
	k, ok := b.byID[id]
	b.mu.Unlock()
	if ok {
		return k, nil
	}
	var subject, kekID string
	var wrapped []byte
	err := b.pool.QueryRow(ctx, `SELECT subject, kek_id, wrapped FROM subject_keys WHERE id = $1`, id).Scan(&subject, &kekID, &wrapped)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrShredded
	}
	if err != nil {
		return nil, fmt.Errorf("read data key: %w", err)
	}
	raw, err := b.ring.unwrap(kekID, subject, wrapped)
	if err != nil {
		return nil, err
	}
	aead, err := newAEAD(raw)
	if err != nil {
		return nil, err
	}
	k = &dataKey{id: id, aead: aead, kekID: kekID, wrapped: wrapped}
	b.mu.Lock()
	if len(b.byID) >= maxCachedKeys {
		b.byID = map[[16]byte]*dataKey{}
	}
	b.byID[id] = k
	b.mu.Unlock()
	return k, nil
}

// Forget drops the cached keys of subjects (after they were erased here): the next body of such a
// subject would get a fresh key, which the commit refuses to store for an erased subject anyway.
func (b *Bodies) Forget(subjects []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range subjects {
		if k, ok := b.bySubject[s]; ok {
			delete(b.byID, k.id)
			delete(b.bySubject, s)
		}
	}
	// Keys opened for reading of these subjects are not indexed by subject: start over.
	b.byID = map[[16]byte]*dataKey{}
}

// checkKeysSQL reads one stored data key per master key id: it walks subject_keys_kek_idx from one
// id to the next, so it reads as many keys as there are master key ids, however many bookings the
// ledger holds. Every id is a non-empty text, so the first read's condition (at least the empty
// text) bounds nothing; it gives that read an index condition.
const checkKeysSQL = `WITH RECURSIVE keks AS (
    (SELECT kek_id, subject, wrapped FROM subject_keys WHERE kek_id >= '' ORDER BY kek_id LIMIT 1)
    UNION ALL
    SELECT n.kek_id, n.subject, n.wrapped FROM keks,
        LATERAL (SELECT s.kek_id, s.subject, s.wrapped FROM subject_keys s
                 WHERE s.kek_id > keks.kek_id ORDER BY s.kek_id LIMIT 1) n
)
SELECT kek_id, subject, wrapped FROM keks`

// Check verifies at startup that the keyring opens the data keys stored: one key per master key id
// found in subject_keys. A master key that is missing or wrong fails here, before anything is served.
// Every command that opens the ledger with a master key runs it, so it reads a key per id, not the
// table (checkKeysSQL).
func (b *Bodies) Check(ctx context.Context) error {
	rows, err := b.pool.Query(ctx, checkKeysSQL)
	if err != nil {
		return fmt.Errorf("check master keys: %w", err)
	}
	type sample struct {
		kek, subject string
		wrapped      []byte
	}
	var samples []sample
	for rows.Next() {
		var s sample
		if err := rows.Scan(&s.kek, &s.subject, &s.wrapped); err != nil {
			rows.Close()
			return fmt.Errorf("check master keys: %w", err)
		}
		samples = append(samples, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check master keys: %w", err)
	}
	for _, s := range samples {
		if _, err := b.ring.unwrap(s.kek, s.subject, s.wrapped); err != nil {
			return fmt.Errorf("%s: %w", EnvMasterKey, err)
		}
	}
	return nil
}
