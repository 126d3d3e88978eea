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
func Rewrap(ctx context.Context, pool *pgxpool.Pool, ring *Keyring) (int64, error) {
	var total int64
	for {
		n, err := rewrapOnce(ctx, pool, ring)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}

func rewrapOnce(ctx context.Context, pool *pgxpool.Pool, ring *Keyring) (int64, error) {
	var n int64
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, subject, kek_id, wrapped FROM subject_keys WHERE kek_id <> $1
ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED`, ring.Newest(), rewrapBatch)
		if err != nil {
			return fmt.Errorf("read data keys: %w", err)
		}
		type row struct {
			id               [16]byte
			subject, kek     string
			wrapped, newWrap []byte
		}
		var batch []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.subject, &r.kek, &r.wrapped); err != nil {
				rows.Close()
				return fmt.Errorf("read data keys: %w", err)
			}
			batch = append(batch, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read data keys: %w", err)
		}
		for _, r := range batch {
			raw, err := ring.unwrap(r.kek, r.subject, r.wrapped)
			if err != nil {
				return err
			}
			kek, wrapped := ring.wrap(r.subject, raw)
			if _, err := tx.Exec(ctx, `UPDATE subject_keys SET kek_id = $2, wrapped = $3 WHERE id = $1`, r.id, kek, wrapped); err != nil {
				return fmt.Errorf("rewrap data key: %w", err)
			}
		}
		n = int64(len(batch))
		return nil
	})
	return n, err
}
