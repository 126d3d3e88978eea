package privacy

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// rewrapBatch bounds the data keys rewrapped per transaction.
const rewrapBatch = 500

// KeyCount is how many data keys a master key wraps.
type KeyCount struct {
	KEK  string `json:"master_key"`
	Keys int64  `json:"data_keys"`
}

// KeyCounts lists the master keys that wrap stored data keys, with how many each.
func KeyCounts(ctx context.Context, pool *pgxpool.Pool) ([]KeyCount, error) {
	rows, err := pool.Query(ctx, `SELECT kek_id, count(*) FROM subject_keys GROUP BY kek_id ORDER BY kek_id`)
	if err != nil {
		return nil, fmt.Errorf("count data keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (KeyCount, error) {
		var k KeyCount
		return k, r.Scan(&k.KEK, &k.Keys)
	})
	if err != nil {
		return nil, fmt.Errorf("count data keys: %w", err)
	}
	return out, nil
}

// Rewrap wraps every data key not wrapped by the keyring's newest master key with it, a batch per
// transaction (a crash in between leaves every key wrapped by one configured key or the other). It
// returns how many it rewrapped. Afterwards the older master keys can be removed from the
// configuration. Bodies are not touched: they are sealed with the data keys, which do not change.
//
// Keys are taken in id order, each batch after the last one's, so a pass reads every key once. A key
// another rewrap holds locked is passed over: a pass that rewrapped any is followed by one from the
// start, until a pass from the start finds none.
func Rewrap(ctx context.Context, pool *pgxpool.Pool, ring *Keyring) (int64, error) {
	var (
		total int64
		after *[16]byte // nil: from the start
	)
	for fromStart := true; ; {
		n, last, err := rewrapOnce(ctx, pool, ring, after)
		total += n
		switch {
		case err != nil:
			return total, err
		case n > 0:
			after, fromStart = &last, false
		case fromStart:
			return total, nil
		default:
			after, fromStart = nil, true
		}
	}
}

// rewrapOnce rewraps a batch of the keys after the id after (nil: from the first) and returns how
// many and the last one's id.
func rewrapOnce(ctx context.Context, pool *pgxpool.Pool, ring *Keyring, after *[16]byte) (int64, [16]byte, error) {
	type key struct {
		id           [16]byte
		subject, kek string
		wrapped      []byte
	}
	var batch []key
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, subject, kek_id, wrapped FROM subject_keys WHERE kek_id <> $1 AND ($3::uuid IS NULL OR id > $3)
ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED`, ring.Newest(), rewrapBatch, after)
		if err == nil {
			batch, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (key, error) {
				var k key
				return k, r.Scan(&k.id, &k.subject, &k.kek, &k.wrapped)
			})
		}
		if err != nil {
			return fmt.Errorf("read data keys: %w", err)
		}
		ids, wrapped := make([][16]byte, len(batch)), make([][]byte, len(batch))
		for i, k := range batch {
			raw, err := ring.unwrap(k.kek, k.subject, k.wrapped)
			if err != nil {
				return err
			}
			_, wrapped[i] = ring.wrap(k.subject, raw)
			ids[i] = k.id
		}
		if _, err := tx.Exec(ctx, `UPDATE subject_keys k SET kek_id = $1, wrapped = u.wrapped
FROM unnest($2::uuid[], $3::bytea[]) AS u(id, wrapped) WHERE k.id = u.id`, ring.Newest(), ids, wrapped); err != nil {
			return fmt.Errorf("rewrap data keys: %w", err)
		}
		return nil
	})
	if err != nil || len(batch) == 0 {
		return 0, [16]byte{}, err
	}
	return int64(len(batch)), batch[len(batch)-1].id, nil
}
