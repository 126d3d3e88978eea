package process

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// claimTx is a claim's transaction on one connection of the pool, sent in fewer round trips than
// pgx's own: BEGIN goes out with the locking read (begin), and the claim's last writes with COMMIT
// (commit). In between it is a pgx.Tx on that connection, for what the claim reads and writes as it
// goes (the calendar row, the seats, an outcome decided there).
type claimTx struct {
	conn *pgxpool.Conn
}

var _ pgx.Tx = claimTx{}

// errNested: a claim's transaction has no savepoints.
var errNested = errors.New("process: a claim's transaction has no nested transactions")

// beginClaim acquires a connection and sends BEGIN with the statements queued on first, in one round
// trip, running their callbacks. The caller ends it with commit or rollback, then release.
func beginClaim(ctx context.Context, pool *pgxpool.Pool, first *pgx.Batch) (claimTx, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return claimTx{}, err
	}
	t := claimTx{conn: conn}
	first.QueuedQueries = append([]*pgx.QueuedQuery{{SQL: "BEGIN", Fn: func(br pgx.BatchResults) error {
		_, err := br.Exec()
		return err
	}}}, first.QueuedQueries...)
	if err := t.conn.SendBatch(ctx, first).Close(); err != nil {
		t.rollback()
		t.release()
		return claimTx{}, err
	}
	return t, nil
}

// commit sends the statements queued on last, then COMMIT, then those queued on after (reads that
// belong after the claim's commit, each keeping its own outcome), in one round trip. A COMMIT the
// server answers with ROLLBACK (the transaction had failed) is a failure too. Once the server answered
// COMMIT the claim stands whatever after met: an error of after's is after's to report, and a
// transaction it left open (a read that failed) is rolled back.
func (t claimTx) commit(ctx context.Context, last, after *pgx.Batch) error {
	committed := false
	last.Queue("COMMIT").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() != "COMMIT" {
			return fmt.Errorf("commit: the server answered %q", tag)
		}
		committed = true
		return nil
	})
	if after != nil {
		last.QueuedQueries = append(last.QueuedQueries, after.QueuedQueries...)
	}
	err := t.conn.SendBatch(ctx, last).Close()
	if committed {
		t.rollback()
		return nil
	}
	return err
}

// rollback ends a transaction that failed, when the connection is still in it. When the ROLLBACK
// cannot be sent either, release hands the pool a connection in a transaction, which the pool closes.
func (t claimTx) rollback() {
	pc := t.conn.Conn().PgConn()
	if pc.IsClosed() || pc.TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = t.conn.Exec(ctx, "ROLLBACK")
}

// release gives the connection back to the pool.
func (t claimTx) release() { t.conn.Release() }

// Begin implements pgx.Tx: a claim has no savepoints.
func (t claimTx) Begin(context.Context) (pgx.Tx, error) { return nil, errNested }

// Commit implements pgx.Tx: commit with nothing queued.
func (t claimTx) Commit(ctx context.Context) error { return t.commit(ctx, &pgx.Batch{}, nil) }

// Rollback implements pgx.Tx.
func (t claimTx) Rollback(context.Context) error { t.rollback(); return nil }

// CopyFrom implements pgx.Tx.
func (t claimTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	return t.conn.CopyFrom(ctx, table, columns, src)
}

// SendBatch implements pgx.Tx.
func (t claimTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.conn.SendBatch(ctx, b)
}

// LargeObjects implements pgx.Tx: a claim stores none. pgx builds working ones on its own
// transactions only; the zero value returned here must not be used.
func (t claimTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

// Prepare implements pgx.Tx.
func (t claimTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Conn().Prepare(ctx, name, sql)
}

// Exec implements pgx.Tx.
func (t claimTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

// Query implements pgx.Tx.
func (t claimTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

// QueryRow implements pgx.Tx.
func (t claimTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

// Conn implements pgx.Tx.
func (t claimTx) Conn() *pgx.Conn { return t.conn.Conn() }
